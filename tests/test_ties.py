"""The near-tie rule of the exact-equality tests accepts float ties and nothing else."""

import numpy as np
import pytest

from edge_translator.toolchain.testmodels import english_sentences

from .ties import beam_margin, beam_tie, greedy_tie, onnx_next_logprobs


@pytest.fixture(scope="module")
def fp32(fp32_parts):
    bundle, tok, seq = fp32_parts
    sources = [tok.encode(s, bundle.targets["zh-Hans"].id) for s in english_sentences(30, seed=77)]
    return seq, bundle, sources


def test_greedy_tie_accepts_a_float_tie_only():
    def scores(source, prefix):
        row = np.full(10, -20.0)
        row[[3, 4]] = -0.7
        row[4] -= 5e-6   # 3 and 4 tie within float noise
        row[5] = -0.8    # 5 is close, but not a tie
        return row

    assert greedy_tie([1], [7, 3, 9], [7, 4, 2], 0, scores)[0]
    assert not greedy_tie([1], [7, 3, 9], [7, 5, 2], 0, scores)[0]
    assert not greedy_tie([1], [7, 3], [7, 3, 3], 0, scores, ours_ended=False, reference_ended=False)[0]


def test_greedy_tie_refuses_a_real_difference(fp32):
    seq, bundle, sources = fp32
    scorer = onnx_next_logprobs(seq)
    refused = 0
    for source, hyp in zip(sources, seq.greedy_all(sources, 12)):
        if len(hyp.ids) < 3:
            continue
        prefix = list(hyp.ids[:2])
        worst = int(np.argmin(np.where(np.isfinite(scorer(source, prefix)), scorer(source, prefix), np.inf)))
        wrong = prefix + [worst] + list(hyp.ids[3:])
        refused += not greedy_tie(source, hyp.ids, wrong, bundle.eos_id, scorer)[0]
    assert refused >= 10


def test_beam_replay_equals_the_runtime_and_refuses_real_differences(fp32):
    seq, bundle, sources = fp32
    scorer = onnx_next_logprobs(seq)
    ours = dict(seq.beam(sources, [12] * len(sources), 3))
    decided = 0
    for i, source in enumerate(sources):
        gap, best = beam_margin(source, 3, 12, scorer, bundle.eos_id, bundle.pad_id, seq.forced_eos)
        if gap > 1e-4:  # no near-tie: the replay must find exactly what the runtime found
            decided += 1
            assert list(best) == list(ours[i].ids)
            altered = list(ours[i].ids[:-1]) + [(ours[i].ids[-1] + 1) % bundle.vocab_size] if ours[i].ids else [5]
            assert not beam_tie(ours[i].ids, altered, lambda: (gap, best))[0]
    assert decided >= 20
