"""Shared fixtures: a home of the run's own, the committed tiny model and its bundles, and a CLI runner."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# Qt widgets in the GUI tests draw offscreen: no display is needed (or used, if there is one).
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

#: Where the app (and every library under it) keeps per-user files: each points into the
#: run's own home, for the test process and every process it starts.
HOME_VARIABLES = {"HOME": "", "XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share",
                  "XDG_STATE_HOME": ".local/state", "XDG_CACHE_HOME": ".cache", "XDG_RUNTIME_DIR": "run"}
#: The user's own choices that would reach the app through the environment: its model, its
#: models folder, a systemd state folder, Hugging Face's caches, a Ray cluster.
USER_VARIABLES = ("EDGE_TRANSLATOR_MODEL", "EDGE_TRANSLATOR_MODELS_DIR", "STATE_DIRECTORY", "HF_HOME",
                  "HF_HUB_CACHE", "TRANSFORMERS_CACHE", "RAY_ADDRESS", "APPDATA", "LOCALAPPDATA")
_RUN_HOME: Path | None = None


def pytest_configure(config) -> None:
    """Give the run a home of its own before anything is collected: no test reads or writes
    the home of whoever runs the suite (its kept documents, memory, models or settings)."""
    global _RUN_HOME
    _RUN_HOME = Path(tempfile.mkdtemp(prefix="edge-translator-tests-"))
    for name, relative in HOME_VARIABLES.items():
        folder = _RUN_HOME / relative
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.environ[name] = str(folder)
    for name in USER_VARIABLES:
        os.environ.pop(name, None)


def pytest_unconfigure(config) -> None:
    if _RUN_HOME is not None:
        shutil.rmtree(_RUN_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def run_home() -> Path:
    """The run's own home folder (``$HOME`` of the tests and of every process they start)."""
    assert _RUN_HOME is not None
    return _RUN_HOME

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: The real opus-mt-en-zh configuration, shipped inside the repository with the toolchain.
REFERENCE = ROOT / "edge_translator" / "toolchain" / "reference" / "opus-mt-en-zh"


@pytest.fixture(scope="session")
def tiny_hf() -> Path:
    """The tiny Hugging Face Marian model the bundles were exported from."""
    return FIXTURES / "tiny-marian"


@pytest.fixture(scope="session")
def tiny_fp32() -> Path:
    return FIXTURES / "tiny-fp32"


@pytest.fixture(scope="session")
def tiny_int8() -> Path:
    return FIXTURES / "tiny-int8"


@pytest.fixture(scope="session")
def fp32_parts(tiny_fp32):
    """``(bundle, tokenizer, model)`` of the FP32 fixture, the model on one thread."""
    from edge_translator.core.bundle import load_bundle
    from edge_translator.core.decode import Seq2Seq
    from edge_translator.core.tokenizer import Tokenizer

    bundle = load_bundle(tiny_fp32)
    tokenizer = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                               bundle.pad_id)
    return bundle, tokenizer, Seq2Seq.load(bundle, threads=1)


@pytest.fixture
def bundle_copy(tmp_path, tiny_int8) -> Path:
    """A writable copy of the INT8 fixture bundle."""
    dst = tmp_path / "bundle"
    shutil.copytree(tiny_int8, dst)
    return dst


def run_cli(*args: str, stdin: bytes | None = None, env: dict | None = None, cwd: Path | None = None):
    """Run ``python -m edge_translator.cli`` in a subprocess, as a user would."""
    full_env = dict(os.environ)
    full_env.pop("EDGE_TRANSLATOR_MODEL", None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "edge_translator.cli", *args], input=stdin,
                          capture_output=True, env=full_env, cwd=cwd or ROOT, timeout=600)


_TIE_COUNTERS: list = []


@pytest.fixture
def tie_counter(request):
    """A :class:`tests.ties.TieCounter` for this test, reported at the end of the run."""
    from .ties import TieCounter

    counter = TieCounter(request.node.name)
    yield counter
    _TIE_COUNTERS.append(counter)


def pytest_terminal_summary(terminalreporter):
    """Say how many exact-equality comparisons met a float near-tie (and were accepted as one)."""
    if _TIE_COUNTERS:
        terminalreporter.section("near-ties in exact-equality tests")
        for counter in _TIE_COUNTERS:
            terminalreporter.write_line(counter.summary())


#: The npm clients the daemon is tested against (tests/node/package.json).
NODE_DIR = ROOT / "tests" / "node"


def run_node(script: str, *args: str, what: str) -> subprocess.CompletedProcess:
    """Run ``tests/node/SCRIPT`` with Node.js, installing the npm clients first if needed.

    Args:
        what: The client, for the message when Node.js is missing.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip(f"Node.js and npm are not installed on this machine, so the npm {what} client cannot run "
                    "(install nodejs and npm to include it)")
    wanted = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]
    if not all((NODE_DIR / "node_modules" / name).is_dir() for name in wanted):
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True, capture_output=True,
                       timeout=300)
    return subprocess.run([node, script, *args], cwd=NODE_DIR, capture_output=True, text=True, timeout=120)
