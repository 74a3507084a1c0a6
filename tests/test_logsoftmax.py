"""The per-step log-softmax on ONNX Runtime (core/logsoftmax.py) and the scores it gives."""

import copy

import numpy as np
import pytest

from edge_translator.core.greedybatch import GreedyBatch
from edge_translator.core.iobinding import BoundDecoder
from edge_translator.core.logsoftmax import GRAPH, INPUT, OUTPUT, open_log_softmax
from edge_translator.toolchain.testmodels import english_sentences

from .ties import onnx_next_logprobs


def test_the_embedded_graph_is_the_one_node_log_softmax_the_onnx_package_builds():
    onnx = pytest.importorskip("onnx")  # the "export" extra, which the test command installs
    from onnx import TensorProto, helper

    dims = ["rows", "new_length", "vocab"]
    graph = helper.make_graph([helper.make_node("LogSoftmax", [INPUT], [OUTPUT], name="log_softmax", axis=-1)],
                              "log_softmax", [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, dims)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="edge-translator",
                              ir_version=8)
    onnx.checker.check_model(model)
    assert model.SerializeToString() == GRAPH


@pytest.mark.parametrize("rows, width", [(1, 7), (5, 65001), (33, 1000)])
def test_log_softmax_matches_float64_numpy(rows, width):
    rng = np.random.default_rng(rows)
    logits = (rng.standard_normal((rows, 1, width)) * 8 + rng.uniform(-50, 50, (rows, 1, 1))).astype(np.float32)
    logits[0, 0, 0] = 90.0  # one dominant value: a row whose normaliser is nearly its peak
    (out,) = open_log_softmax().run(None, {INPUT: logits})
    wide = logits.astype(np.float64)
    peak = wide.max(axis=-1, keepdims=True)
    expected = wide - peak - np.log(np.exp(wide - peak).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(out, expected, rtol=0, atol=2e-5)


def _sources(parts, count, seed):
    bundle, tokenizer, _ = parts
    target = bundle.targets["zh-Hans"].id
    return [tokenizer.encode(s, target) for s in english_sentences(count, seed)]


def test_greedy_scores_are_the_mean_log_probability_of_the_chosen_tokens(fp32_parts):
    """With ONNX Runtime normalising (the default) and with numpy, the score of every row is
    the mean of its tokens' log-probabilities as an uncached float64 replay computes them,
    ``</s>`` included when it was produced."""
    bundle, _, model = fp32_parts
    assert model.normalizer is not None and model.binds
    numpy_model = copy.copy(model)
    numpy_model.normalizer = None
    sources = _sources(fp32_parts, 12, 21)
    limits = [6 + (5 * k) % 30 for k in range(len(sources))]
    replay = onnx_next_logprobs(model)
    stops = set()
    for m in (model, numpy_model):
        for source, hyp in zip(sources, m.greedy_all(sources, limits)):
            tokens = list(hyp.ids) + ([bundle.eos_id] if hyp.stop == "eos" else [])
            expected = np.mean([replay(source, tokens[:k])[t] for k, t in enumerate(tokens)])
            assert hyp.score == pytest.approx(expected, abs=1e-4)
            stops.add(hyp.stop)
    assert stops == {"eos", "length"}


def test_the_normaliser_changes_no_chosen_token(fp32_parts):
    model = fp32_parts[2]
    numpy_model = copy.copy(model)
    numpy_model.normalizer = None
    sources = _sources(fp32_parts, 16, 8)
    ours, theirs = model.greedy_all(sources, 30), numpy_model.greedy_all(sources, 30)
    assert [h.ids for h in ours] == [h.ids for h in theirs]  # the choice reads the raw logits in both


def test_log_probs_need_a_normaliser(fp32_parts):
    model = fp32_parts[2]
    ids, mask = model.pad(_sources(fp32_parts, 2, 1))
    cross_k, cross_v = model.encode(ids, mask)
    bound = BoundDecoder(model.decoder, cross_k, cross_v, mask, model.logits_width)
    bound.step(np.full((2, 1), model.bundle.decoder_start_id, np.int64))
    with pytest.raises(RuntimeError, match="no normalizer"):
        bound.log_probs()


def test_a_batch_gives_its_log_probs_buffer_back(fp32_parts):
    model = fp32_parts[2]
    model.buffers.clear()
    batch = GreedyBatch(model, _sources(fp32_parts, 4, 2), [6] * 4)
    batch.step()
    owned, cache = len(batch._bound._owned), len(batch._bound.kv.buffers)
    while not batch.done:
        batch.step()
    assert owned == 3 and cache == 1  # cross K/V, logits, log-probs; the K/V (written in place)
    assert len(model.buffers._free) == owned + cache
