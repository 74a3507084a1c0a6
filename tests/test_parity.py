"""The ONNX path computes what PyTorch computes: tokenization, greedy ids, cache and batching."""

import random

import numpy as np
import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.core.decode import Seq2Seq
from edge_translator.toolchain.testmodels import english_sentences

from .ties import assert_equal_or_tie, beam_margin, beam_tie, greedy_tie, onnx_next_logprobs, torch_next_logprobs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

N_SENTENCES = 200
NEW_TOKENS = 24


@pytest.fixture(scope="module")
def hf(tiny_hf):
    transformers.utils.logging.set_verbosity_error()
    model = transformers.MarianMTModel.from_pretrained(str(tiny_hf)).eval()
    tokenizer = transformers.MarianTokenizer.from_pretrained(str(tiny_hf))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a d32 model gains nothing from threads, and loses much on a busy machine
    yield model, tokenizer
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def fp32(fp32_parts):
    bundle, tok, seq = fp32_parts
    return seq, tok, bundle


def _varied_strings(count: int, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ     ",
        ".,;:!?'\"()[]{}-–—…/\\@#$%^&*+=<>|~`",
        "0123456789",
        "éèêëàâäôöûüçñÉÀÇßøåæœ",
        "😀🦜👍🏽🇨🇳❤️✨",
        "北京欢迎你我们的中文字符繁體",
        "\t\x00\x07\x1b\u200b\u00ad\ufeff",
    ]
    out = english_sentences(count // 2, seed)
    while len(out) < count:
        k = rng.randint(1, 40)
        out.append("".join(rng.choice(rng.choice(pools)) for _ in range(k)))
    return out


def test_tokenizer_matches_marian_tokenizer_on_1000_strings(hf, fp32):
    _, hf_tok = hf
    _, tok, bundle = fp32
    target = bundle.targets["zh-Hans"].id
    strings = _varied_strings(1000)
    mismatches = []
    for s in strings:
        if s.startswith(">>"):
            continue  # MarianTokenizer reads a leading ">>x<<" as a language code
        expected = [target] + hf_tok(s).input_ids
        if tok.encode(s, target) != expected:
            mismatches.append(s)
    assert not mismatches, mismatches[:5]


def test_decode_matches_marian_tokenizer(hf, fp32):
    _, hf_tok = hf
    _, tok, bundle = fp32
    rng = random.Random(5)
    for _ in range(300):
        ids = [rng.randrange(bundle.vocab_size) for _ in range(rng.randint(0, 20))]
        assert tok.decode(ids) == hf_tok.decode(ids, skip_special_tokens=True), ids


def _ended(hyp, seq) -> bool:
    """Whether ``</s>`` followed the hypothesis (produced, or forced at the last position)."""
    return hyp.stop == "eos" or (hyp.stop == "length" and seq.forced_eos)


def test_greedy_equals_transformers_generate_on_200_sentences(hf, fp32, tie_counter):
    model, hf_tok = hf
    seq, tok, bundle = fp32
    target = bundle.targets["zh-Hans"].id
    sentences = english_sentences(N_SENTENCES, seed=11)
    sources = [tok.encode(s, target) for s in sentences]
    ours = seq.greedy_all(sources, NEW_TOKENS)
    scorer = torch_next_logprobs(model, bundle.decoder_start_id)
    ended = 0
    for start in range(0, N_SENTENCES, 50):
        batch = sources[start:start + 50]
        ids, mask = seq.pad(batch)
        with torch.no_grad():
            out = model.generate(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                                 num_beams=1, do_sample=False, max_new_tokens=NEW_TOKENS, max_length=None)
        for row, reference in enumerate(out.tolist()):
            reference = reference[1:]  # drop the decoder start id
            ref_ended = bundle.eos_id in reference
            if ref_ended:
                reference = reference[: reference.index(bundle.eos_id)]
                ended += 1
            hyp, src = ours[start + row], batch[row]
            assert_equal_or_tie(tie_counter, src, hyp.ids, reference, lambda: greedy_tie(
                src, hyp.ids, reference, bundle.eos_id, scorer, _ended(hyp, seq), ref_ended))
    assert ended > N_SENTENCES // 4  # the fixture ends sentences itself, so eos handling is exercised
    assert tie_counter.equal >= N_SENTENCES * 0.95  # ties are rare; many would mean a real bug


def test_cached_equals_uncached_and_batched_equals_single(fp32, tie_counter):
    seq, tok, bundle = fp32
    target = bundle.targets["zh-Hans"].id
    sources = [tok.encode(s, target) for s in english_sentences(24, seed=12)]
    cached = seq.greedy_all(sources, 20)
    uncached = seq.greedy_all(sources, 20, use_cache=False)
    single = [seq.greedy_all([s], 20)[0] for s in sources]
    scorer = onnx_next_logprobs(seq)
    for src, a, b, c in zip(sources, cached, uncached, single):
        for other in (b, c):
            assert_equal_or_tie(tie_counter, src, a.ids, other.ids, lambda: greedy_tie(
                src, a.ids, other.ids, bundle.eos_id, scorer, _ended(a, seq), _ended(other, seq)))
    assert len({h.ids for h in cached}) > 12  # outputs depend on the input


def test_int8_bundle_decodes_deterministically(tiny_int8, fp32):
    # Dynamic INT8 quantizes activations per call (one scale per batch), so a batched
    # INT8 row may differ from the same row alone; a repeated call must not differ.
    _, tok, bundle = fp32
    int8 = Seq2Seq.load(load_bundle(tiny_int8), threads=1)
    sources = [tok.encode(s, bundle.targets["zh-Hans"].id) for s in english_sentences(8, seed=13)]
    assert int8.greedy_all(sources, 16) == int8.greedy_all(sources, 16)
    single = [int8.greedy_all([s], 16)[0] for s in sources]
    assert single == [int8.greedy_all([s], 16)[0] for s in sources]
    logits, k, v = int8.step(np.full((2, 1), bundle.decoder_start_id, np.int64), np.ones((2, 3), np.int64),
                             int8.empty_cache(2), int8.empty_cache(2),
                             *int8.encode(np.array([[5, 6, 0], [7, 8, 0]], np.int64), np.ones((2, 3), np.int64)))
    assert logits.shape == (2, 1, bundle.vocab_size) and k[0].shape == (2, bundle.num_heads, 1, bundle.head_dim)


@pytest.mark.parametrize("beams", [2, 4])
def test_beam_search_equals_transformers_generate(hf, fp32, beams, tie_counter):
    model, _ = hf
    seq, tok, bundle = fp32
    sentences = english_sentences(100, seed=41 + beams)
    sources = [tok.encode(s, bundle.targets["zh-Hans"].id) for s in sentences]
    ours = dict(seq.beam(sources, [20] * len(sources), beams))
    scorer = torch_next_logprobs(model, bundle.decoder_start_id)
    penalty = model.generation_config.length_penalty
    penalty = 1.0 if penalty is None else penalty  # generate()'s default
    for i, src in enumerate(sources):
        with torch.no_grad():
            out = model.generate(input_ids=torch.tensor([src]), attention_mask=torch.ones(1, len(src), dtype=torch.long),
                                 num_beams=beams, do_sample=False, max_new_tokens=20, max_length=None)[0].tolist()[1:]
        if bundle.eos_id in out:
            out = out[: out.index(bundle.eos_id)]
        hyp = ours[i]
        assert_equal_or_tie(tie_counter, src, hyp.ids, out, lambda: beam_tie(hyp.ids, out, lambda: beam_margin(
            src, beams, 20, scorer, bundle.eos_id, bundle.pad_id, seq.forced_eos, penalty)))
    assert tie_counter.equal >= len(sources) * 0.95
