"""Export: round trip, parity recorded, INT8 really INT8, every weight stored once, refusals."""

import json
import shutil

import numpy as np
import onnx
import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.core.errors import ExportError
from edge_translator.toolchain.export import ExportOptions, export
from edge_translator.toolchain.quantize import QuantizeOptions, check_int8, unquantized_weights

from .conftest import run_cli

torch = pytest.importorskip("torch")  # the export extra; CI installs it
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_hf):
    out = tmp_path_factory.mktemp("export") / "tiny-int8"
    result = run_cli("export", str(tiny_hf), str(out), "--quantize", "int8")
    assert result.returncode == 0, result.stderr.decode()
    return out, result


def test_round_trip_manifest(exported, tiny_hf):
    out, result = exported
    assert "FP32 graphs: max |logit diff|" in result.stdout.decode()
    bundle = load_bundle(out)
    m = bundle.manifest
    assert m["format_version"] == 1 and m["model"]["source_language"] == "en"
    assert set(m["files"]) == {"encoder.onnx", "decoder.onnx", "weights.bin", "source.spm", "target.spm",
                               "vocab.json"}
    assert (out / "source.spm").read_bytes() == (tiny_hf / "source.spm").read_bytes()
    assert m["quantization"]["mode"] == "dynamic" and m["quantization"]["per_channel"] is True
    assert m["opset"] >= 17 and m["tools"]["onnxruntime"] != "unknown"
    parity = m["validation"]["fp32_parity"]
    assert parity["sentences"] >= 10 and parity["max_abs_logit_diff"] <= parity["allowed_abs_logit_diff"]
    # a well-scaled model: ONNX, PyTorch float32 and float64 agree to float32 rounding
    assert max(parity["max_abs_logit_diff"], parity["onnx_vs_reference_fp32_max_abs_logit_diff"],
               parity["reference_fp32_max_abs_logit_diff"]) <= 1e-4
    assert parity["greedy"]["identical"] == parity["sentences"]
    agreement = m["validation"]["int8_agreement"]
    assert 0 <= agreement["identical"] <= agreement["sentences"] >= 10
    assert m["created"].startswith("20")
    config = json.loads((tiny_hf / "config.json").read_text())
    assert m["special_ids"] == {"pad": config["pad_token_id"], "eos": 0, "unk": 1,
                                "decoder_start": config["decoder_start_token_id"]}
    assert m["max_positions"] == config["max_position_embeddings"]
    for name, graph in m["graphs"].items():
        model = onnx.load(str(out / graph["file"]), load_external_data=False)
        assert [i.name for i in model.graph.input] == graph["inputs"]
        assert [o.name for o in model.graph.output] == graph["outputs"]


def test_int8_really_is_int8(exported):
    out, _ = exported
    for name in ("encoder.onnx", "decoder.onnx"):
        model = onnx.load(str(out / name))
        inits = {t.name: t for t in model.graph.initializer}
        matmuls = [n for n in model.graph.node if n.op_type == "DynamicQuantizeMatMul"]
        assert matmuls
        for node in matmuls:
            weight = node.input[1]
            if weight in inits:
                assert inits[weight].data_type == onnx.TensorProto.INT8
        floats = [t for t in inits.values() if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 2
                  and np.prod(t.dims) >= 1024]
        assert [t.name for t in floats] == [f"{name.split('.')[0]}.embed_positions"]
    check_int8({"encoder": out / "encoder.onnx", "decoder": out / "decoder.onnx"}, QuantizeOptions(mode="dynamic"))


def test_int8_check_catches_float_weights(tiny_fp32):
    files = {"encoder": tiny_fp32 / "encoder.onnx", "decoder": tiny_fp32 / "decoder.onnx"}
    problems = unquantized_weights(files, QuantizeOptions(mode="dynamic"))
    assert any("lm_head" in p for p in problems) and any("fc1" in p for p in problems)
    with pytest.raises(ExportError, match="did not apply"):
        check_int8(files, QuantizeOptions(mode="dynamic"))


def test_every_weight_is_stored_once(exported, tiny_fp32):
    for bundle_dir in (exported[0], tiny_fp32):
        m = load_bundle(bundle_dir).manifest
        assert m["storage"]["stored_bytes"] < m["storage"]["referenced_bytes"]
        sizes = {}
        for name in ("encoder.onnx", "decoder.onnx"):
            model = onnx.load(str(bundle_dir / name), load_external_data=False)
            for t in model.graph.initializer:
                if t.data_location == onnx.TensorProto.EXTERNAL:
                    info = {e.key: e.value for e in t.external_data}
                    sizes.setdefault((int(info["offset"]), int(info["length"])), set()).add(name)
        # the token embedding (FP32 or INT8) is one region referenced by both graphs
        largest = max(sizes, key=lambda k: k[1])
        assert sizes[largest] == {"encoder.onnx", "decoder.onnx"}
        spans = sorted(sizes)
        assert all(a[0] + a[1] <= b[0] for a, b in zip(spans, spans[1:])), "regions overlap"


def test_fp32_export_and_options(tmp_path, tiny_hf):
    out = tmp_path / "fp32"
    export(tiny_hf, out, ExportOptions(quantize=QuantizeOptions(mode="none")))
    assert load_bundle(out).quantization == {"mode": "none"}
    excl = tmp_path / "excl"
    quant = QuantizeOptions(mode="dynamic", per_channel=False, op_types=("MatMul",), exclude_nodes=("lm_head",))
    export(tiny_hf, excl, ExportOptions(quantize=quant, validate=False))
    decoder = onnx.load(str(excl / "decoder.onnx"), load_external_data=False)
    ops = {n.name: n.op_type for n in decoder.graph.node}
    assert ops["lm_head"] == "Gemm" and ops["decoder.embed_tokens"] == "Gather"
    assert ops["decoder.layers.0.fc1"] == "DynamicQuantizeMatMul"
    inits = {t.name: t for t in decoder.graph.initializer}
    assert list(inits["decoder.layers.0.fc1.scale"].dims) == []  # per-tensor


def test_existing_out_needs_force(tmp_path, tiny_hf):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = run_cli("export", str(tiny_hf), str(out))
    assert result.returncode == 5 and "--force" in result.stderr.decode()
    assert (out / "keep.txt").read_text() == "mine"
    result = run_cli("export", str(tiny_hf), str(out), "--force", "--quantize", "none")
    assert result.returncode == 0, result.stderr.decode()
    assert not (out / "keep.txt").exists() and load_bundle(out)


def _refusal(args, code=5):
    result = run_cli("export", *args)
    err = result.stderr.decode()
    assert result.returncode == code, err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_not_a_marian_model_is_refused(tmp_path, tiny_hf):
    src = tmp_path / "bert"
    shutil.copytree(tiny_hf, src)
    config = json.loads((src / "config.json").read_text())
    config["model_type"] = "bert"
    (src / "config.json").write_text(json.dumps(config))
    assert "not a MarianMT model" in _refusal([str(src), str(tmp_path / "out")])
    assert "does not exist" in _refusal([str(tmp_path / "nothing"), str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_missing_sentencepiece_file_is_refused(tmp_path, tiny_hf):
    src = tmp_path / "src"
    shutil.copytree(tiny_hf, src)
    (src / "target.spm").unlink()
    assert "target.spm is missing" in _refusal([str(src), str(tmp_path / "out")])


def test_unwritable_out_is_refused(tmp_path, tiny_hf):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert "cannot write" in _refusal([str(tiny_hf), str(blocker / "out")])


def test_failed_export_leaves_nothing(tmp_path, tiny_hf, monkeypatch):
    from edge_translator.toolchain import export as export_module

    def broken(*args, **kwargs):
        raise ExportError("simulated failure")

    monkeypatch.setattr(export_module, "check_int8", broken)
    with pytest.raises(ExportError, match="simulated"):
        export(tiny_hf, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_independent_marian_model_exports(tmp_path, tiny_hf):
    """A Marian model of other sizes, activation and seed, built with transformers directly."""
    vocab = json.loads((tiny_hf / "vocab.json").read_text())
    config = transformers.MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(vocab), d_model=48, encoder_layers=3, decoder_layers=1,
        encoder_attention_heads=6, decoder_attention_heads=3, encoder_ffn_dim=96, decoder_ffn_dim=80,
        max_position_embeddings=96, activation_function="gelu", pad_token_id=len(vocab) - 1,
        decoder_start_token_id=len(vocab) - 1, eos_token_id=0, forced_eos_token_id=0, scale_embedding=False,
    )
    torch.manual_seed(1234)
    model = transformers.MarianMTModel(config)
    src = tmp_path / "other"
    model.save_pretrained(src)
    for name in ("source.spm", "target.spm", "vocab.json"):
        shutil.copy(tiny_hf / name, src / name)
    for quantize in ("none", "int8"):
        result = run_cli("export", str(src), str(tmp_path / quantize), "--quantize", quantize)
        assert result.returncode == 0, result.stderr.decode()
        parity = load_bundle(tmp_path / quantize).manifest["validation"]["fp32_parity"]
        assert parity["max_abs_logit_diff"] <= min(parity["allowed_abs_logit_diff"], 1e-4)


def test_static_int8_calibrated(tmp_path, tiny_hf):
    calibration = tmp_path / "calibration.txt"
    calibration.write_text("Where is the train station?\nThe price is $12.50 today.\n\nGood morning, Dr. Chen.\n")
    out = tmp_path / "qdq"
    result = run_cli("export", str(tiny_hf), str(out), "--calibrate", str(calibration))
    assert result.returncode == 0, result.stderr.decode()
    m = load_bundle(out).manifest
    assert m["quantization"]["mode"] == "static" and m["quantization"]["calibration"]["file"] == "calibration.txt"
    assert m["validation"]["int8_check"]["passed"]
    decoder = onnx.load(str(out / "decoder.onnx"), load_external_data=False)
    assert any(n.op_type == "DequantizeLinear" for n in decoder.graph.node)
    assert any(n.op_type == "QuantizeLinear" for n in decoder.graph.node)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert "no sentences" in _refusal([str(tiny_hf), str(tmp_path / "q2"), "--calibrate", str(empty)])


def test_restricted_output_layer(tmp_path, tiny_hf, tiny_fp32):
    from edge_translator.core.decode import Seq2Seq
    from edge_translator.toolchain.testmodels import english_sentences

    out = tmp_path / "restricted"
    result = run_cli("export", str(tiny_hf), str(out), "--quantize", "none", "--restrict-output")
    assert result.returncode == 0, result.stderr.decode()
    restricted = load_bundle(out)
    ids = restricted.output_ids
    vocab = json.loads((tiny_hf / "vocab.json").read_text())
    assert 0 in ids and 1 in ids and vocab["<pad>"] not in ids and len(ids) < len(vocab) * 0.7
    assert restricted.manifest["validation"]["restriction_agreement"]["identical"] == 12
    full = Seq2Seq.load(load_bundle(tiny_fp32), threads=1)
    small = Seq2Seq.load(restricted, threads=1)
    src, mask = full.pad([[2, 40, 41, 42, 0], [2, 50, 0]])
    start = np.full((2, 1), restricted.decoder_start_id, np.int64)
    logits_full = full.step(start, mask, full.empty_cache(2), full.empty_cache(2), *full.encode(src, mask))[0]
    logits_small = small.step(start, mask, small.empty_cache(2), small.empty_cache(2), *small.encode(src, mask))[0]
    assert logits_small.shape[-1] == len(ids)
    np.testing.assert_allclose(logits_small, logits_full[..., ids], atol=1e-5)
    from edge_translator.core.tokenizer import Tokenizer

    tok = Tokenizer.load(restricted.source_spm, restricted.target_spm, restricted.vocab, 0, 1, restricted.pad_id)
    sources = [tok.encode(s, 2) for s in english_sentences(60, seed=31)]
    assert small.greedy_all(sources, 20) == full.greedy_all(sources, 20)
