"""LibreTranslate as a peer of the daemon: its own venv, its settings, its process.

LibreTranslate 1.9.6 pins numpy < 2 and its own CTranslate2 stack, so it lives in a venv
of its own under the work folder, installed from PyPI once and reused. It runs offline on
an argos package of the same model (:mod:`.argospackage`), started by
:mod:`.ltlauncher` (run with that venv's Python), which applies the patches that make it
work offline with an opus-mt-shaped model. Every directory argos and LibreTranslate write
to (data, config, cache, packages, home) is under the work folder, so nothing touches
``~/.local``. A setting is LibreTranslate's defaults or one
``ARGOS_INTER_THREADS`` × ``ARGOS_INTRA_THREADS`` pair; every setting decodes greedily
(``ARGOS_BEAM_SIZE=1``), as the daemon does.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import EdgeTranslatorError
from . import ltlauncher

logger = logging.getLogger(__name__)

LIBRETRANSLATE_VERSION = "1.9.6"
#: argos's greedy decoding; its default is a beam of 4.
BEAM_SIZE = 1
#: Sentinel of :class:`Setting` for LibreTranslate's own thread settings.
DEFAULTS = "defaults"


@dataclass(frozen=True)
class Setting:
    """LibreTranslate's defaults (``inter`` 0), or one inter × intra thread pair."""

    inter: int = 0
    """``ARGOS_INTER_THREADS``: CTranslate2 translators working at once; 0: LibreTranslate's default (1)."""
    intra: int = 0
    """``ARGOS_INTRA_THREADS``: threads of each; 0 with ``inter`` 0: the default (0, CTranslate2's choice)."""

    @property
    def name(self) -> str:
        return DEFAULTS if self.is_default else f"{self.inter}x{self.intra}"

    @property
    def is_default(self) -> bool:
        return self.inter == 0

    def environment(self) -> dict[str, str]:
        """The ``ARGOS_*_THREADS`` variables of this setting (none for the defaults)."""
        if self.is_default:
            return {}
        return {"ARGOS_INTER_THREADS": str(self.inter), "ARGOS_INTRA_THREADS": str(self.intra)}


def parse_grid(text: str) -> tuple[Setting, ...]:
    """``"1x2,2x1"`` → the settings (inter × intra).

    Raises:
        ValueError: For an entry that is not two positive integers joined by ``x``.
    """
    settings = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            inter, intra = (int(v) for v in item.lower().split("x"))
        except ValueError:
            raise ValueError(f"--lt-grid entries are INTERxINTRA, e.g. 2x1, not {item!r}") from None
        if inter < 1 or intra < 1:
            raise ValueError(f"--lt-grid entries need at least one thread each, not {item!r}")
        settings.append(Setting(inter, intra))
    if not settings:
        raise ValueError("--lt-grid is empty")
    return tuple(dict.fromkeys(settings))


def default_grid(cpus: int | None = None) -> tuple[Setting, ...]:
    """Every inter × intra pair (powers of two) that fits in the machine's logical CPUs."""
    cpus = max(1, cpus or os.cpu_count() or 1)
    steps = [1 << k for k in range(8) if 1 << k <= cpus]
    return tuple(Setting(inter, intra) for inter in steps for intra in steps if inter * intra <= cpus)


@dataclass(frozen=True)
class LibreTranslateOptions:
    """How LibreTranslate is installed and measured beside the daemon."""

    work: Path = Path("work/libretranslate")
    """Its venv, argos data and packages, the unbundled checkpoint and the logs."""
    version: str = LIBRETRANSLATE_VERSION
    """The LibreTranslate release installed from PyPI."""
    grid: tuple[Setting, ...] = ()
    """Thread settings tried besides the defaults; empty: :func:`default_grid`."""
    tune_seconds: float = 8.0
    """Length of each measure of the sweep that picks the best setting."""
    seconds: float = 20.0
    """Length of each measure of the alternating rounds (sequential and concurrent alike)."""
    rounds: int = 3
    """Alternating rounds (ours, then each LibreTranslate setting); medians are reported, and
    a ratio as such only where the rounds' ranges do not cross."""
    checkpoint: Path | None = None
    """A MarianMT checkpoint of the served bundle's model (the full shape's, from
    ``edge-translator test-model full``); ``None`` unbundles the bundle."""
    length: str = "cap"
    """CTranslate2's decoding length: ``"cap"``, the daemon's limit as its maximum; ``"exact"``,
    exactly the daemon's limit (random models); ``""``, argos's own (256)."""
    agreement_sentences: int = 24
    """Requests compared between the two servers, to show they run the same model."""

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"rounds must be at least 1, not {self.rounds}")
        if self.length not in ("", *ltlauncher.LENGTH_PATCHES):
            raise ValueError(f"length must be one of {sorted(ltlauncher.LENGTH_PATCHES)} or '', not {self.length!r}")
        if self.seconds <= 0 or self.tune_seconds <= 0:
            raise ValueError("the LibreTranslate measures need a positive length")

    @property
    def settings(self) -> tuple[Setting, ...]:
        """The defaults, then the grid."""
        return (Setting(),) + tuple(s for s in (self.grid or default_grid()) if not s.is_default)

    @property
    def venv(self) -> Path:
        return self.work / "venv"

    @property
    def data(self) -> Path:
        return self.work / "data"

    @property
    def packages(self) -> Path:
        return self.data / "packages"


class LibreTranslateError(EdgeTranslatorError):
    """LibreTranslate could not be installed or started."""


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def installed_version(venv: Path) -> str | None:
    """The LibreTranslate version installed in ``venv``, ``None`` when there is none."""
    python = _venv_python(venv)
    if not python.is_file():
        return None
    probe = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('libretranslate'))"],
                           capture_output=True, text=True)
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure_venv(opts: LibreTranslateOptions) -> Path:
    """LibreTranslate's venv, created and installed from PyPI only when it is missing.

    Returns:
        The venv's Python.

    Raises:
        LibreTranslateError: When ``python -m venv`` or ``pip install`` fails (the log is
            in the work folder).
    """
    found = installed_version(opts.venv)
    if found == opts.version:
        return _venv_python(opts.venv)
    opts.work.mkdir(parents=True, exist_ok=True)
    log = opts.work / "install.log"
    logger.info("installing libretranslate==%s into %s (minutes; logged in %s)", opts.version, opts.venv, log)
    with open(log, "w") as out:
        steps = ([sys.executable, "-m", "venv", str(opts.venv)] if found is None else None,
                 [str(_venv_python(opts.venv)), "-m", "pip", "install", f"libretranslate=={opts.version}"])
        for step in filter(None, steps):
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                raise LibreTranslateError(f"`{' '.join(step)}` failed; see {log}")
    if installed_version(opts.venv) != opts.version:
        raise LibreTranslateError(f"{opts.venv} does not hold libretranslate {opts.version} after installing; "
                                  f"see {log}")
    return _venv_python(opts.venv)


def environment(opts: LibreTranslateOptions, setting: Setting) -> dict[str, str]:
    """The environment LibreTranslate runs in: private argos directories, greedy decoding, the setting.

    ``ARGOS_*``, ``LT_*``, ``XDG_*``, ``PYTHONPATH`` and ``VIRTUAL_ENV`` of the caller are
    dropped, so that only what is listed here configures it.
    """
    data = opts.data.resolve()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ARGOS_", "LT_", "XDG_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update({
        "HOME": str(data / "home"),  # argos's defaults live under it; nothing is left to reach ~
        "XDG_DATA_HOME": str(data / "share"),  # argos data (MiniSBD's cache would go here)
        "XDG_CONFIG_HOME": str(data / "config"),  # argos settings.json (none is written)
        "XDG_CACHE_HOME": str(data / "cache"),  # argos downloads
        "ARGOS_PACKAGES_DIR": str(data / "packages"),  # where the package of our model is installed
        "ARGOS_PACKAGE_INDEX": "http://127.0.0.1:9/",  # a dead loopback port, should anything ask
        "ARGOS_DEVICE_TYPE": "cpu",
        "ARGOS_BEAM_SIZE": str(BEAM_SIZE),  # greedy, as the daemon decodes
        "PYTHONNOUSERSITE": "1",
        **setting.environment(),
    })
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def segmenter_path() -> Path:
    """edge-translator's sentence segmenter, the file the launcher loads."""
    return Path(__file__).resolve().parent.parent / "core" / "text.py"


class LibreTranslateProcess:
    """LibreTranslate started by the launcher on a free 127.0.0.1 port and waited for.

    Args:
        python: The venv's Python.
        opts: Where its data is, and whether lengths are matched.
        setting: Its thread setting.
        source, target: The language codes it loads.
        max_positions: The model's positions (for ``opts.length``).

    Raises:
        LibreTranslateError: If it exits, or does not answer ``/languages`` within 300 s.
    """

    def __init__(self, python: Path, opts: LibreTranslateOptions, setting: Setting, source: str, target: str,
                 max_positions: int = 0):
        for sub in ("home", "share", "config", "cache", "packages"):
            (opts.data / sub).mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = opts.work / f"libretranslate-{setting.name}.log"
        launcher = [str(Path(python).absolute()), "-I", str(Path(ltlauncher.__file__).resolve()), "--segmenter", str(segmenter_path())]
        if opts.length:
            launcher += ["--length", opts.length, "--max-positions", str(max_positions)]
        flags = ["--host", "127.0.0.1", "--port", str(self.port), "--load-only", f"{source},{target}"]
        self._log = open(self.log, "w")
        self.process = subprocess.Popen([*launcher, "--", *flags], stdout=self._log, stderr=subprocess.STDOUT,
                                        env=environment(opts, setting), cwd=str(opts.data))
        self.command = " ".join(["libretranslate", *flags])
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._log.close()
                raise LibreTranslateError(f"LibreTranslate exited ({self.process.returncode}) at start; see {self.log}")
            try:
                with urllib.request.urlopen(self.url + "/languages", timeout=5) as response:
                    if response.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.5)
        self.stop()
        raise LibreTranslateError(f"LibreTranslate did not answer within 300 s; see {self.log}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> int:
        """SIGTERM (waitress stops at once), then its exit code; killed after 60 s."""
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._log.close()
        return code

    def log_facts(self) -> dict:
        """From its log: the patches applied and the connections refused."""
        text = self.log.read_text(errors="replace") if self.log.is_file() else ""
        patches = [line.split(":", 2)[2].strip() for line in text.splitlines()
                   if line.startswith(ltlauncher.READY_LINE)]
        refused = sum(1 for line in text.splitlines() if line.startswith(ltlauncher.REFUSED_LINE))
        return {"patches": patches[0].split(", ") if patches else [], "refused_connections": refused}


def versions(python: Path) -> dict:
    """Versions of LibreTranslate's stack in its venv."""
    code = ("import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in "
            "('libretranslate', 'argos-translate-lt', 'ctranslate2', 'sentencepiece', 'numpy')}))")
    probe = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return json.loads(probe.stdout) if probe.returncode == 0 else {}
