"""The core imports only the stdlib, numpy, onnxruntime, sentencepiece and itself, and does nothing at import.

Two checks of one allow-list: every import statement in ``edge_translator/core`` (lazy
ones inside functions included) names an allowed module, and a fresh interpreter that
imports and uses the core loads nothing that importing the three allowed libraries alone
does not load.
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "edge_translator" / "core"
ALLOWED_LIBRARIES = ("numpy", "onnxruntime", "sentencepiece")
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}


def _modules_after(code: str) -> set[str]:
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _libraries_baseline() -> set[str]:
    """Top-level modules that the allowed libraries (and the stdlib) load by themselves."""
    loaded = _modules_after("import " + ", ".join(ALLOWED_LIBRARIES))
    return {m.split(".")[0] for m in loaded}


def _outside_the_wall(loaded: set[str], ours: tuple[str, ...]) -> list[str]:
    allowed_tops = _libraries_baseline() | STDLIB | set(ALLOWED_LIBRARIES)
    bad = []
    for name in loaded:
        top = name.split(".")[0]
        if top == "edge_translator":
            if not (name in ("edge_translator",) or name.startswith(ours)):
                bad.append(name)
        elif top not in allowed_tops:
            bad.append(name)
    return sorted(bad)


def test_core_source_imports_only_allowed_modules():
    offenders = []
    for path in sorted(CORE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: must stay inside the core
                    if node.level > 1:
                        offenders.append(f"{path.name}:{node.lineno} from {'.' * node.level}{node.module or ''}")
                    continue
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in STDLIB and top not in ALLOWED_LIBRARIES and not name.startswith("edge_translator.core"):
                    offenders.append(f"{path.name}:{node.lineno} {name}")
    assert not offenders, offenders


def test_the_wall_catches_an_outsider():
    # The check itself can fail: a module outside the allow-list is reported.
    assert _outside_the_wall({"numpy", "torch", "edge_translator.gui"}, ("edge_translator.core",)) == [
        "edge_translator.gui", "torch"]


def test_importing_the_core_and_cli_loads_nothing_else():
    loaded = _modules_after(
        "import edge_translator, edge_translator.cli\n"
        "from edge_translator.core import bundle, decode, errors, sessions, text, tokenizer, translator"
    )
    assert not _outside_the_wall(loaded, ("edge_translator.core", "edge_translator.cli"))


def test_translating_loads_nothing_else(tiny_int8):
    loaded = _modules_after(
        "from edge_translator.core.translator import Translator\n"
        f"print(Translator.load({str(tiny_int8)!r}).translate('Hello there.'))"
    )
    assert "onnxruntime" in loaded and "sentencepiece" in loaded
    assert not _outside_the_wall(loaded, ("edge_translator.core",))


def test_import_has_no_side_effects(tmp_path):
    code = ("import os; os.chdir(%r); before = set(os.listdir('.'))\n"
            "import edge_translator, edge_translator.cli, edge_translator.core.translator\n"
            "assert set(os.listdir('.')) == before\n"
            "import sys; assert 'onnxruntime' not in sys.modules\n") % str(tmp_path)
    subprocess.run([sys.executable, "-c", code], check=True)


PACKAGE = CORE.parent


def test_onnxruntime_is_imported_in_one_place_only():
    """Every use of ONNX Runtime goes through ``core.sessions.onnxruntime()``, which turns its
    telemetry off before the first import: any other import statement could come first."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.relative_to(PACKAGE)}:{node.lineno}" for n in names if n.split(".")[0] == "onnxruntime"]
    assert found == ["core/sessions.py:" + str(_line_of(CORE / "sessions.py", "import onnxruntime as ort"))]


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.strip() == text)


def test_translating_writes_nothing_outside_and_turns_onnxruntime_telemetry_off(tiny_int8, tmp_path):
    """ONNX Runtime's Linux package writes a device id and an event cache under
    ``~/.cache/Microsoft`` on import unless ``ORT_DISABLE_TELEMETRY=1`` was set first. The
    runtime sets it, so translating leaves the home and cache folders as they were."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    code = ("import os\nfrom edge_translator.core.translator import Translator\n"
            f"print(Translator.load({str(tiny_int8)!r}).translate('Hello there.'))\n"
            "import onnxruntime, sys\n"
            "assert os.environ['ORT_DISABLE_TELEMETRY'] == '1'\n")
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=tmp_path, capture_output=True)
    assert [p for p in tmp_path.rglob("*") if p != home] == []
