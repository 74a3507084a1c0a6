"""The core imports only the stdlib, numpy, onnxruntime and sentencepiece, and does nothing at import."""

import json
import subprocess
import sys

FORBIDDEN = ("torch", "transformers", "PySide6", "onnx", "edge_translator.toolchain")


def _modules_after(code: str) -> set[str]:
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_core_and_cli_import_no_heavy_dependency():
    loaded = _modules_after(
        "import edge_translator, edge_translator.cli\n"
        "from edge_translator.core import bundle, decode, errors, sessions, text, tokenizer, translator"
    )
    assert not [m for m in loaded if m.split(".")[0] in FORBIDDEN or m.startswith(FORBIDDEN)]


def test_translating_loads_no_heavy_dependency(tiny_int8):
    loaded = _modules_after(
        "from edge_translator.core.translator import Translator\n"
        f"print(Translator.load({str(tiny_int8)!r}).translate('Hello there.'))"
    )
    assert "onnxruntime" in loaded and "sentencepiece" in loaded
    assert not [m for m in loaded if m.split(".")[0] in FORBIDDEN]


def test_import_has_no_side_effects(tmp_path):
    code = ("import os; os.chdir(%r); before = set(os.listdir('.'))\n"
            "import edge_translator, edge_translator.cli, edge_translator.core.translator\n"
            "assert set(os.listdir('.')) == before\n"
            "import sys; assert 'onnxruntime' not in sys.modules\n") % str(tmp_path)
    subprocess.run([sys.executable, "-c", code], check=True)
