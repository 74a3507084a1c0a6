"""int8r bundles: INT8 weights per channel, activations quantized per row (``--quantize int8r``)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.toolchain.quantize import QuantizeOptions, check_int8, unquantized_weights

from .conftest import run_cli
from .test_blockquant import _logit_spread, _parts, check_batch_mates
from .test_kvcache import check_rows_that_join

torch = pytest.importorskip("torch")  # the export extra; CI installs it


@pytest.fixture(scope="module")
def int8r_bundle(tmp_path_factory, tiny_hf):
    """The tiny model exported as int8r through the CLI: ``(directory, stdout)``."""
    out = tmp_path_factory.mktemp("rowwise") / "int8r"
    result = run_cli("export", str(tiny_hf), str(out), "--quantize", "int8r")
    assert result.returncode == 0, result.stderr.decode()
    return out, result.stdout.decode()


def _files(out):
    return {"encoder": out / "encoder.onnx", "decoder": out / "decoder.onnx"}


def test_int8r_exports_and_translates(int8r_bundle):
    out, stdout = int8r_bundle
    m = load_bundle(out).manifest
    q = m["quantization"]
    assert q["mode"] == "rowwise" and q["weight_type"] == "int8" and q["per_channel"] is True
    assert "per row" in q["activations"] and q["operators"] == ["MatMulIntegerToFloat"]
    assert "runtime" not in m  # no CPU or ONNX Runtime requirement beyond the package's own
    invariance = m["validation"]["batch_invariance"]
    assert invariance["sentences"] >= 10 and invariance["differ"] == 0
    assert "batched vs one at a time: 0/" in stdout
    ops = {}
    for name, path in _files(out).items():
        graph = onnx.load(str(path), load_external_data=False).graph
        ops[name] = [n.op_type for n in graph.node]
        weights = {t.name for t in graph.initializer}
        assert not {"DynamicQuantizeMatMul", "MatMulNBits", "Gemm"} & set(ops[name])
        assert not [n.name for n in graph.node if n.op_type == "MatMul" and set(n.input) & weights]
    config = m["model"]["architecture"]
    # encoder: qkv, out, fc1, fc2 per layer, and one cross K/V projection per decoder layer
    assert ops["encoder"].count("MatMulIntegerToFloat") == 4 * config["encoder_layers"] + config["decoder_layers"]
    # decoder: qkv, out, cross q, cross out, fc1, fc2 per layer, and the output layer
    assert ops["decoder"].count("MatMulIntegerToFloat") == 6 * config["decoder_layers"] + 1
    # one row quantization per distinct input: the encoder's last hidden state feeds all cross K/V
    assert ops["encoder"].count("QuantizeLinear") == 4 * config["encoder_layers"] + 1
    check_int8(_files(out), QuantizeOptions(mode="rowwise"))
    result = run_cli("translate", "--model", str(out), stdin="The weather is nice today. I will go out.".encode())
    assert result.returncode == 0 and result.stdout.decode().strip(), result.stderr.decode()
    assert b"Traceback" not in result.stderr


def test_export_defaults_to_int8r(tmp_path, tiny_hf):
    out = tmp_path / "default"
    result = run_cli("export", str(tiny_hf), str(out))
    assert result.returncode == 0, result.stderr.decode()
    assert load_bundle(out).quantization["mode"] == "rowwise"


def test_int8r_stores_weights_like_int8(int8r_bundle, tiny_int8):
    """Same INT8 bytes as the int8 scheme (one embedding matrix for lookup and output), within a few scales."""
    out, _ = int8r_bundle
    size = (out / "weights.bin").stat().st_size
    assert abs(size - (tiny_int8 / "weights.bin").stat().st_size) <= 0.05 * size


def test_output_does_not_depend_on_batch_mates(int8r_bundle, tie_counter):
    """A sentence decodes to the same ids alone and in batches of any company (near-ties aside)."""
    check_batch_mates(int8r_bundle[0], tie_counter, seed=13)


def test_rows_that_join_a_decoding_batch_decode_as_they_do_alone(int8r_bundle, tie_counter):
    """Continuous batching over the aligned, per-row quantized graphs: a row's company,
    and the step it joined at, do not change its output."""
    parts = _parts(int8r_bundle[0])
    assert parts[2].ragged and parts[2].cross_align > 1
    check_rows_that_join(parts, tie_counter, seed=37)


def test_int8r_is_batch_invariant_where_int8_is_not(int8r_bundle, tiny_int8):
    assert _logit_spread(tiny_int8) > 1e-3
    assert _logit_spread(int8r_bundle[0]) <= 1e-4


# -- the row-quantized linear layer on its own ---------------------------------------------------
def _linear_session(weight, bias):
    """An ONNX session computing one row-quantized linear layer, built by the exporter's builder."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from edge_translator.toolchain.onnxbuild import OPSET, GraphBuilder

    g = GraphBuilder("linear", QuantizeOptions(mode="rowwise"))
    y = g.linear("x", weight, bias, "probe")
    graph = helper.make_graph(g.nodes, "linear", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                ["batch", weight.shape[0]])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in g.inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                    helper.make_opsetid("com.microsoft", 1)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("k,n", [(100, 37), (512, 512), (257, 1024)])
def test_row_quantized_linear_is_within_its_error_bound_and_exact_per_row(k, n):
    """Within the rounding bound of the scheme for any row, and each row bit-identical in any batch.

    A row's codes have a step of ``peak / 64`` and a column's weights one of ``max|w| / 127``,
    so each product term is off by at most half a step of each: an outlier makes its whole
    row coarse (the known cost of per-row scales), never wrong beyond that bound.
    """
    rng = np.random.default_rng(k + n)
    weight = rng.normal(0, 0.05, (k, n)).astype(np.float32)
    bias = rng.normal(0, 0.1, n).astype(np.float32)
    session = _linear_session(weight, bias)
    # rows of very different scales, and one with an outlier
    x = rng.normal(0, 1, (9, k)).astype(np.float32) * np.float32([[1e-3], [1], [30], [1], [1], [5], [1], [1], [1]])
    x[6, 3] = 200.0
    got = session.run(None, {"x": x})[0]
    reference = x.astype(np.float64) @ weight + bias
    x_step = np.abs(x).max(axis=1, keepdims=True) / 64
    w_step = np.abs(weight).max(axis=0, keepdims=True) / 127
    bound = np.abs(x) @ (w_step / 2).repeat(k, 0) + (x_step / 2) * np.abs(weight).sum(axis=0) + k * x_step * w_step / 4
    assert np.all(np.abs(got - reference) <= 1.001 * bound + 1e-5)
    typical = np.abs(reference[[1, 3, 4, 7, 8]]).max()
    assert np.abs(got - reference)[[1, 3, 4, 7, 8]].max() <= 0.03 * typical  # ordinary rows: about 1%
    for row in range(len(x)):
        alone = session.run(None, {"x": x[row:row + 1]})[0]
        assert np.array_equal(alone[0], got[row])
        assert np.array_equal(session.run(None, {"x": x[[row, 0, 5]]})[0][0], got[row])


def test_a_row_of_zeros_gives_exactly_the_bias():
    """A zero row has a zero scale: its codes are meaningless, its output must still be exact."""
    rng = np.random.default_rng(0)
    weight = rng.normal(0, 0.05, (64, 48)).astype(np.float32)
    bias = rng.normal(0, 0.1, 48).astype(np.float32)
    x = rng.normal(0, 1, (3, 64)).astype(np.float32)
    x[1] = 0.0
    got = _linear_session(weight, bias).run(None, {"x": x})[0]
    assert np.all(np.isfinite(got)) and np.array_equal(got[1], bias)


# -- options and checks ------------------------------------------------------------------------------
def test_check_refuses_a_stray_float_matrix_in_int8r(tmp_path, tiny_hf):
    from edge_translator.toolchain.graphs import write_graphs
    from edge_translator.toolchain.marian import extract_weights, load_model

    model, _ = load_model(tiny_hf)
    weights = extract_weights(model, str(tiny_hf))
    written = write_graphs(weights, QuantizeOptions(mode="rowwise", exclude_nodes=("encoder.layers.0.fc1",)),
                           tmp_path)
    problems = unquantized_weights(written.files, QuantizeOptions(mode="rowwise"))
    assert len(problems) == 1 and "encoder.layers.0.fc1" in problems[0]
    with pytest.raises(Exception, match="did not apply"):
        check_int8(written.files, QuantizeOptions(mode="rowwise"))


def test_int8r_with_a_restricted_output_layer(tmp_path, tiny_hf):
    out = tmp_path / "restricted"
    result = run_cli("export", str(tiny_hf), str(out), "--quantize", "int8r", "--restrict-output")
    assert result.returncode == 0, result.stderr.decode()
    m = load_bundle(out).manifest
    assert m["output_vocabulary"]["size"] < len(json.loads((out / "vocab.json").read_text(encoding="utf-8")))
    assert m["validation"]["batch_invariance"]["differ"] == 0
    result = run_cli("translate", "--model", str(out), stdin=b"Where is the station?")
    assert result.returncode == 0 and result.stdout.decode().strip(), result.stderr.decode()


def test_int8r_refuses_per_tensor_weights(tmp_path, tiny_hf):
    out = tmp_path / "out"
    result = run_cli("export", str(tiny_hf), str(out), "--quantize", "int8r", "--no-per-channel")
    err = result.stderr.decode()
    assert result.returncode != 0 and "per channel" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
