"""Loading a bundle verifies every file; a changed byte or a wrong format is refused, naming the file."""

import json

import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.core.errors import BundleError

from .conftest import run_cli


def test_fixture_bundle_loads(tiny_int8):
    bundle = load_bundle(tiny_int8)
    assert bundle.targets["zh-Hans"].token == ">>cmn_Hans<<"
    assert bundle.targets["zh-Hant"].token == ">>cmn_Hant<<"
    vocab = json.loads(bundle.vocab.read_text())
    assert bundle.pad_id == len(vocab) - 1 == bundle.decoder_start_id
    assert bundle.eos_id == vocab["</s>"] and bundle.unk_id == vocab["<unk>"]
    assert bundle.targets["zh-Hans"].id == vocab[">>cmn_Hans<<"]


@pytest.mark.parametrize("name", ["encoder.onnx", "decoder.onnx", "weights.bin", "source.spm",
                                  "target.spm", "vocab.json"])
def test_one_changed_byte_is_refused_naming_the_file(bundle_copy, name):
    path = bundle_copy / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(BundleError, match=name.replace(".", r"\.") + ".*sha256"):
        load_bundle(bundle_copy)


def test_truncated_file_is_refused(bundle_copy):
    path = bundle_copy / "weights.bin"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(BundleError, match=r"weights\.bin has .* bytes"):
        load_bundle(bundle_copy)


def test_missing_file_is_refused(bundle_copy):
    (bundle_copy / "decoder.onnx").unlink()
    with pytest.raises(BundleError, match=r"decoder\.onnx is missing"):
        load_bundle(bundle_copy)


def test_wrong_format_version_is_refused(bundle_copy):
    manifest = json.loads((bundle_copy / "bundle.json").read_text())
    manifest["format_version"] = 99
    (bundle_copy / "bundle.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="format_version 99"):
        load_bundle(bundle_copy)


def test_missing_and_malformed_manifest(bundle_copy, tmp_path):
    with pytest.raises(BundleError, match="does not exist"):
        load_bundle(tmp_path / "nowhere")
    (bundle_copy / "bundle.json").write_text("{not json")
    with pytest.raises(BundleError, match="not valid JSON"):
        load_bundle(bundle_copy)
    (bundle_copy / "bundle.json").unlink()
    with pytest.raises(BundleError, match=r"bundle\.json is missing"):
        load_bundle(bundle_copy)


def test_cli_reports_corrupt_bundle_in_one_line(bundle_copy):
    path = bundle_copy / "weights.bin"
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    result = run_cli("translate", "--model", str(bundle_copy), "Hello.")
    err = result.stderr.decode()
    assert result.returncode == 3
    assert err.count("\n") == 1 and "weights.bin" in err and "Traceback" not in err
    assert result.stdout == b""


def test_cli_reports_missing_bundle(tmp_path):
    result = run_cli("translate", "--model", str(tmp_path / "missing"), "Hello.")
    assert result.returncode == 3
    assert "does not exist" in result.stderr.decode() and "Traceback" not in result.stderr.decode()


def test_bundle_names_its_scheme_as_export_does(tiny_int8):
    from edge_translator.core.bundle import load_bundle, scheme_name
    from edge_translator.toolchain.quantize import SCHEME_MODES

    for name, mode in SCHEME_MODES.items():
        assert scheme_name(mode) == name
    assert scheme_name("future-mode") == "future-mode"
    bundle = load_bundle(tiny_int8)
    assert SCHEME_MODES[bundle.scheme] == bundle.quantization["mode"]
