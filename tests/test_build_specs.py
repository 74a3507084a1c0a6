"""The PyInstaller specs leave modules out (build/common.py); nothing the apps run may need them.

A left-out module that shipped code imports would only fail in the built app, on the code
path that imports it, long after the build passed. So every import statement in the
shipped package (lazy ones included) is checked against the exclusion list, and so are
attribute uses of numpy's lazily loaded subpackages (``np.random`` needs no import).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "edge_translator"
#: Not in the apps (the toolchain and the benchmarks are left out whole; the GUI's screenshot
#: tool is for docs).
NOT_SHIPPED = ("toolchain", "bench", "gui/screenshot.py")


def _common():
    spec = importlib.util.spec_from_file_location("build_common", ROOT / "build" / "common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shipped() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if not str(p.relative_to(PACKAGE)).startswith(NOT_SHIPPED)]


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def _excluded(name: str, excludes: list[str]) -> bool:
    return any(name == e or name.startswith(e + ".") for e in excludes)


def test_shipped_code_imports_nothing_the_apps_leave_out():
    common = _common()
    # The toolchain and its libraries are imported lazily by the commands that need them;
    # a built app answers those in one line (tests/test_cli.py), so they are not checked here.
    checked = [e for e in common.EXCLUDES if e not in common.FORBIDDEN]
    bad = [f"{p.relative_to(ROOT)}:{line}: {name}" for p in _shipped() for line, name in _imports(p)
           if _excluded(name, checked)]
    assert bad == []


def test_shipped_code_uses_no_lazily_loaded_numpy_subpackage():
    lazy = [e.split(".", 1)[1] for e in _common().EXCLUDES if e.startswith("numpy.")]
    pattern = re.compile(r"\b(?:np|numpy)\.(%s)\b" % "|".join(lazy))
    bad = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in _shipped()
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert bad == []


def test_the_check_finds_an_excluded_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from numpy.random import default_rng\n    import pdb\n")
    names = [name for _, name in _imports(sample)]
    assert _excluded(names[0], _common().EXCLUDES) and _excluded(names[-1], _common().EXCLUDES)


def test_translating_loads_nothing_the_apps_leave_out(tiny_int8):
    """What a library function imports on its first call escapes the static checks above
    (``np.setdiff1d`` loads the masked-array subpackage): translate texts whose sentences finish at
    different steps, in a fresh interpreter, and look at what was loaded."""
    import json
    import subprocess
    import sys

    script = (
        "import json, sys\n"
        "from edge_translator.core.translator import Translator\n"
        f"t = Translator.load({str(tiny_int8)!r}, cache=None)\n"
        "t.translate('Hello there. The weather is fine today, and the shops are open until late. Yes.')\n"
        "t.translate_batch(['One.', 'Two more words here.', 'A third sentence, somewhat longer than the others.'])\n"
        "t.close()\n"
        "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if _excluded(m, _common().EXCLUDES)] == []


def _spec_datas(spec: Path) -> list[tuple[Path, str]]:
    """The ``datas`` of a spec's ``Analysis``: ``(source, destination in the app)``, sources resolved
    against the checkout (each entry is ``(str(ROOT / ...), "dest")``)."""
    tree = ast.parse(spec.read_text(encoding="utf-8"))
    call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "Analysis")
    datas = next(k.value for k in call.keywords if k.arg == "datas")
    return [(Path(eval(compile(ast.Expression(entry.elts[0]), str(spec), "eval"), {"ROOT": ROOT, "str": str})),
             ast.literal_eval(entry.elts[1])) for entry in datas.elts]


def _web_files_not_carried(datas: list[tuple[Path, str]]) -> list[str]:
    """The web page's files (daemon/web.py ``FILES``) that no ``datas`` entry puts where the package has them."""
    from edge_translator.daemon.web import FILES

    folder = "edge_translator/daemon/web"
    missing = []
    for name in FILES:
        if not any((src.is_dir() and (src / name).is_file() and dest.rstrip("/") == folder)
                   or (src.is_file() and src.name == name and dest.rstrip("/") in (folder, f"{folder}/{name}"))
                   for src, dest in datas):
            missing.append(f"{folder}/{name}")
    return missing


def test_the_cli_app_carries_every_file_of_the_web_page():
    """``serve`` answers ``/`` from package data (daemon/web.py reads it through importlib.resources):
    a file the one-file app lacks would be a 500 there and nowhere else."""
    assert _web_files_not_carried(_spec_datas(ROOT / "build" / "edge-translator.spec")) == []


def test_the_web_page_check_finds_a_missing_file(tmp_path):
    web = ROOT / "edge_translator" / "daemon" / "web"
    spec = tmp_path / "app.spec"
    spec.write_text('a = Analysis(["x.py"], datas=[(str(ROOT / "edge_translator" / "daemon" / "web" / "app.js"), '
                    '"edge_translator/daemon/web"), (str(ROOT / "models"), "edge_translator/daemon/web")])\n')
    assert _spec_datas(spec) == [(web / "app.js", "edge_translator/daemon/web"),
                                 (ROOT / "models", "edge_translator/daemon/web")]
    assert sorted(_web_files_not_carried(_spec_datas(spec))) == ["edge_translator/daemon/web/index.html",
                                                                 "edge_translator/daemon/web/style.css"]
    assert _web_files_not_carried([(web, "edge_translator/daemon/web")]) == []
    assert _web_files_not_carried([(web, "web")]) != []
