"""The translate command as users run it: arguments, stdin, bad input, exit codes."""

import re

from .conftest import run_cli

HAN = re.compile(r"[\u4e00-\u9fff]")


def test_translate_argument_with_default_model():
    result = run_cli("translate", "Where is the train station?")
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    assert HAN.search(out) and out.endswith("\n") and out.count("\n") == 1


def test_translate_stdin_keeps_paragraphs(tiny_int8):
    text = "  Hello world. How are you?\n\nSecond paragraph.\n- a list item\n"
    result = run_cli("translate", "--model", str(tiny_int8), "-", stdin=text.encode())
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    assert out.startswith("  ") and HAN.search(out)
    assert re.sub(r"[^\n]", "", out) == "\n\n\n\n"  # the same line structure
    assert "\n\n" in out


def test_environment_variable_selects_model(tiny_fp32, tmp_path):
    result = run_cli("translate", "Hi.", env={"EDGE_TRANSLATOR_MODEL": str(tmp_path / "nope")})
    assert result.returncode == 3 and "nope" in result.stderr.decode()
    result = run_cli("translate", "Hi.", env={"EDGE_TRANSLATOR_MODEL": str(tiny_fp32)})
    assert result.returncode == 0 and HAN.search(result.stdout.decode())


def test_empty_input_gives_empty_output(tiny_int8):
    result = run_cli("translate", "--model", str(tiny_int8), "-", stdin=b"")
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""


def test_invalid_utf8_is_one_line_error(tiny_int8):
    result = run_cli("translate", "--model", str(tiny_int8), "-", stdin=b"Hello \xff\xfe world")
    err = result.stderr.decode()
    assert result.returncode == 4 and "UTF-8" in err and err.count("\n") == 1 and "Traceback" not in err
    assert result.stdout == b""


def test_unknown_target_and_bad_options(tiny_int8):
    result = run_cli("translate", "--model", str(tiny_int8), "--target", "fr", "Hi.")
    assert result.returncode == 2 and "zh-Hans" in result.stderr.decode()
    result = run_cli("translate", "--model", str(tiny_int8), "--threads", "0", "Hi.")
    assert result.returncode == 2 and "threads" in result.stderr.decode()
    result = run_cli("translate", "--model", str(tiny_int8), "--target", "zh-Hant", "Hi.")
    assert result.returncode == 0


def test_version_and_help():
    assert run_cli("--version").stdout.decode().startswith("edge-translator ")
    helped = run_cli("translate", "--help")
    assert helped.returncode == 0 and b"--model" in helped.stdout


def test_invalid_utf8_argument_is_one_line_error(tiny_int8):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONUTF8": "1"}
    result = subprocess.run([sys.executable, "-m", "edge_translator.cli", "translate", "--model", str(tiny_int8),
                             b"caf\xe9"], capture_output=True, env=env)
    err = result.stderr.decode()
    assert result.returncode == 4 and "not valid UTF-8" in err and "Traceback" not in err


def test_huge_input_is_translated_completely(tiny_int8):
    text = ("This is sentence number one of many. " * 400).strip() + "\n"
    result = run_cli("translate", "--model", str(tiny_int8), "-", stdin=text.encode())
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    assert out.count("。") + out.count(".") >= 400 and out.endswith("\n")


def test_a_build_without_the_toolchain_says_so_in_one_line(monkeypatch, capsys, tmp_path):
    """The single-file builds leave the toolchain out; its commands then explain, exit 6."""
    import sys

    from edge_translator import cli

    for name in ("edge_translator.toolchain.quantize", "edge_translator.toolchain.export"):
        monkeypatch.setitem(sys.modules, name, None)
    code = cli.main(["export", str(tmp_path / "hf"), str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 6 and err.count("\n") == 1
    assert "needs the toolchain" in err and "edge-translator[export]" in err and "Traceback" not in err


def test_a_build_without_a_layer_still_lists_its_commands_and_names_the_extra(monkeypatch, capsys):
    """The apps leave whole layers out (build/common.py, the specs); their commands stay in
    --help and answer any arguments, --help too, in one line with the extra, exit 6."""
    import sys

    import pytest

    from edge_translator import cli

    for name in ("edge_translator.toolchain", "edge_translator.toolchain.command", "edge_translator.toolchain.dictcommand",
                 "edge_translator.bench",
                 "edge_translator.bench.command", "edge_translator.gui", "edge_translator.gui.command"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setenv("COLUMNS", "200")  # one line per command
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    listing = capsys.readouterr().out
    assert listing.count("not in this build") == 20 and "bench-request" in listing and "shortlist-curve" in listing
    assert "not in this build (pip install 'edge-translator[export]')" in listing
    assert "translate text" in listing and "run the offline translation server" in listing  # kept layers unchanged
    for argv, extra, what in ((["export", "--help"], "export", "the toolchain"),
                              (["-v", "bench", "--smoke", "--out", "x"], "bench", "the benchmarks"),
                              (["gui", "--self-test"], "gui", "the desktop app")):
        code = cli.main(argv)
        err = capsys.readouterr().err
        assert code == 6 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"needs {what}" in err and f"pip install 'edge-translator[{extra}]'" in err


def test_each_layer_declares_the_commands_the_cli_lists_for_it():
    """cli._LAYERS names each layer's commands for a build without it: they must be what it declares."""
    import argparse
    import importlib

    from edge_translator import cli

    for module, _, _, commands in cli._LAYERS:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).add_parsers(sub)
        assert tuple(sub.choices) == commands, module


def test_declaring_the_commands_imports_no_layer_beyond_its_command_module():
    """``translate`` builds the whole parser at start-up: the layers' command modules must leave
    their work (and torch, Qt, the server, the benchmarks' libraries) to the command that runs."""
    import json
    import subprocess
    import sys

    from edge_translator import cli

    packages = sorted({m.rsplit(".", 1)[0] for m, *_ in cli._LAYERS})
    script = ("import importlib, json, sys\n"
              f"for package in {packages!r}: importlib.import_module(package)\n"
              "before = set(sys.modules)\n"
              "from edge_translator import cli\ncli.build_parser()\n"
              "print(json.dumps(sorted(set(sys.modules) - before)))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                       check=True).stdout.strip().splitlines()[-1])
    ours = [m for m in loaded if m.startswith("edge_translator")]
    layers = {m for m, *_ in cli._LAYERS}
    assert [m for m in ours if not m.startswith("edge_translator.core") and m != "edge_translator.cli"
            and m not in layers] == []
    assert {m for m in ours if m in layers or m.endswith(".command")} == layers
    heavy = ("torch", "transformers", "onnx", "onnxruntime", "PySide6", "waitress", "prometheus_client",
             "ctranslate2", "matplotlib", "docx", "tqdm")
    assert [m for m in loaded if m.split(".")[0] in heavy] == []
