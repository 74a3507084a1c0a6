"""A greedy batch's own memory (core/kvcache.py, core/iobinding.py): same numbers as ONNX Runtime's outputs,
given back when done."""

import copy
import gc
import weakref

import numpy as np
import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.core.decode import Seq2Seq
from edge_translator.core.graphio import SOURCE_ALIGN, cross_alignment
from edge_translator.core.greedybatch import GreedyBatch
from edge_translator.core.iobinding import SOURCE_SLACK, BoundDecoder, encode_bound, encoder_groups
from edge_translator.core.kvcache import BufferPool, KVBuffers, SharedKV, compaction_order, mapped
from edge_translator.core.tokenizer import Tokenizer
from edge_translator.toolchain.testmodels import english_sentences

from .conftest import ROOT
from .ties import assert_equal_or_tie, greedy_tie, onnx_next_logprobs


def _mapping(array: np.ndarray):
    """The memory mapping under an array from :func:`mapped`."""
    while isinstance(array, np.ndarray):
        array = array.base
    return array.obj


def _sources(parts, count, seed):
    bundle, tokenizer, _ = parts
    target = bundle.targets["zh-Hans"].id
    return [tokenizer.encode(s, target) for s in english_sentences(count, seed)]


def test_kv_buffers_keep_their_contents_through_growth_and_dropped_rows():
    rng = np.random.default_rng(0)
    layers, rows, heads, dim = 2, 5, 3, 4
    kv = KVBuffers(layers, rows, heads, dim, capacity=2)
    expected = [np.zeros((rows, heads, 0, dim), np.float32) for _ in range(2 * layers)]
    kept = np.arange(rows)
    for step in range(9):
        kv.reserve()
        for segment in range(2 * layers):  # what the decoder will read, after any growth
            np.testing.assert_array_equal(kv.past(segment), expected[segment])
        for segment in range(2 * layers):
            new = rng.standard_normal((len(kept), heads, 1, dim)).astype(np.float32)
            expected[segment] = np.concatenate([expected[segment], new], axis=2)
            kv.present(segment)[...] = expected[segment]  # what the decoder writes: past + the new position
        kv.advance()
        if step == 3:  # rows 1 and 3 finish
            slots = np.array([0, 2, 4])
        elif step == 6:  # then the first of those
            slots = np.array([1, 2])
        else:
            slots = None
        if slots is not None:
            kv.keep(slots)
            kept = kept[slots]
            expected = [e[slots] for e in expected]
        assert kv.rows == len(kept) and kv.length == step + 1
        for segment in range(2 * layers):
            past = kv.past(segment)
            assert past.flags.c_contiguous
            np.testing.assert_array_equal(past, expected[segment])
    assert kv.capacity == 10  # 2 -> 4 -> 6 -> 8 -> 10 for 9 positions


def test_kv_buffers_refuse_empty_shapes():
    with pytest.raises(ValueError, match="at least 1"):
        KVBuffers(2, 0, 3, 4)
    with pytest.raises(ValueError, match="at least 1"):
        SharedKV(2, 3, 0, 4)


def test_shared_kv_keeps_each_rows_positions_through_growth_and_dropped_rows():
    """Rows at different lengths: what the decoder wrote at each row's own position is still
    there after the buffer grows and rows leave (moved down in place)."""
    rng = np.random.default_rng(1)
    layers, rows, heads, dim = 2, 5, 3, 4
    kv = SharedKV(layers, rows, heads, dim, capacity=3)
    kv.lengths[:] = [0, 2, 1, 0, 2]  # rows that joined at different steps
    expected = [[[rng.standard_normal((heads, dim)).astype(np.float32) for _ in range(n)] for n in kv.lengths]
                for _ in range(2 * layers)]
    for segment in range(2 * layers):
        for row, positions in enumerate(expected[segment]):
            for pos, values in enumerate(positions):
                kv.segment(segment)[row, :, pos] = values
    kept = list(range(rows))
    for step in range(8):
        kv.reserve()
        assert kv.capacity >= int(kv.lengths.max()) + 1
        for segment in range(2 * layers):  # the decoder writes each row's new position in place
            for slot, row in enumerate(kept):
                new = rng.standard_normal((heads, dim)).astype(np.float32)
                kv.segment(segment)[slot, :, kv.lengths[slot]] = new
                expected[segment][row].append(new)
        kv.advance()
        slots = {2: [0, 2, 3], 5: [1, 2]}.get(step)
        if slots is not None:
            kv.keep(np.asarray(slots))
            kept = [kept[k] for k in slots]
        assert kv.rows == len(kept)
        for segment in range(2 * layers):
            for slot, row in enumerate(kept):
                assert kv.lengths[slot] == len(expected[segment][row])
                np.testing.assert_array_equal(kv.segment(segment)[slot, :, : kv.lengths[slot]],
                                              np.stack(expected[segment][row], axis=1))
    assert kv.capacity == 9  # 3 -> 6 -> 9: the longest row left (it started at 1) ends with 9 positions
    assert kv.lengths.dtype == np.int32 and kv.lengths.flags.c_contiguous  # what is bound


def test_a_ragged_decoder_row_gives_what_it_gives_alone(fp32_parts):
    """Rows at different positions in one call, over a cache longer than any of them, give
    each row the logits and the K/V it gets decoded alone: a row's self-attention reads its
    own positions only."""
    bundle, _, model = fp32_parts
    sources = _sources(fp32_parts, 4, 17)
    ids, mask = model.pad(sources)
    cross_k, cross_v = model.encode(ids, mask)
    lengths = [3, 0, 6, 1]  # each row's cached positions
    alone, prefixes = [], []
    for row, length in enumerate(lengths):  # decode each row alone, one token at a time
        sub_k, sub_v = [c[row: row + 1] for c in cross_k], [c[row: row + 1] for c in cross_v]
        past_k, past_v = model.empty_cache(1), model.empty_cache(1)
        token = np.full((1, 1), bundle.decoder_start_id, np.int64)
        prefix = [int(token[0, 0])]
        for _ in range(length + 1):
            logits, past_k, past_v = model.step(token, mask[row: row + 1], past_k, past_v, sub_k, sub_v)
            token = model.next_tokens(logits[:, -1].copy()).reshape(1, 1).astype(np.int64)
            prefix.append(int(token[0, 0]))
        alone.append((logits[0, -1], [p[0] for p in past_k], [p[0] for p in past_v]))
        prefixes.append(prefix)
    capacity = 16
    feed = {"input_ids": np.asarray([[p[n]] for p, n in zip(prefixes, lengths)], np.int64),
            "encoder_attention_mask": mask, "past_lengths": np.asarray(lengths, np.int32)}
    for layer in range(model.layers):
        for kind, values in (("key", 1), ("value", 2)):
            past = np.full((len(lengths), model.heads, capacity, model.head_dim), 7.0, np.float32)  # junk beyond
            for row, n in enumerate(lengths):
                past[row, :, :n] = alone[row][values][layer][:, :n]
            feed[f"past_{kind}.{layer}"] = past
        feed[f"cross_key.{layer}"], feed[f"cross_value.{layer}"] = cross_k[layer], cross_v[layer]
    names = ["logits"] + [f"present_key.{i}" for i in range(model.layers)]
    out = model.decoder.run(names, feed)
    for row, n in enumerate(lengths):
        np.testing.assert_array_equal(out[0][row, -1], alone[row][0])
        for layer in range(model.layers):
            np.testing.assert_array_equal(out[1 + layer][row, :, : n + 1], alone[row][1][layer])


def test_mapped_arrays_are_zeroed_writable_and_unmapped_when_freed():
    array = mapped((3, 4))
    assert array.dtype == np.float32 and not array.any()
    array[1, 2] = 5.0
    ref = weakref.ref(_mapping(array))
    del array
    assert ref() is None


@pytest.fixture(scope="module", params=["ragged", "legacy"])
def graph_parts(request, fp32_parts):
    """``(bundle, tokenizer, model)``: the FP32 fixture (GroupQueryAttention, cache written in
    place), or the tiny bundle exported before row positions, whose decoder appends to a past
    of one length."""
    if request.param == "ragged":
        assert fp32_parts[2].ragged
        return fp32_parts
    bundle = load_bundle(ROOT / "tests" / "fixtures" / "tiny-int8r-127")
    tokenizer = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                               bundle.pad_id)
    model = Seq2Seq.load(bundle, threads=1)
    assert not model.ragged
    return bundle, tokenizer, model


@pytest.mark.parametrize("rows, seed", [(1, 3), (4, 8), (13, 21)])
def test_encode_bound_writes_exactly_what_the_encoder_returns(graph_parts, rows, seed):
    """Batches of several sizes and source lengths, encoded in one call: the cross K/V
    written into the pool's buffer are the encoder's own outputs, value for value, in one
    array a batch."""
    _, _, model = graph_parts
    assert model.binds_encoder  # what greedy batches of real sessions use
    ids, mask = model.pad(_sources(graph_parts, rows, seed))
    expected_k, expected_v = model.encode(ids, mask)
    aligned = -(-ids.shape[1] // model.cross_align) * model.cross_align
    pool = BufferPool(spares=2)
    spare = pool.take(2 * model.layers * expected_k[0].size + 100)
    spare[:] = np.nan  # whatever was there before must all be overwritten
    pool.give(spare)
    buffer, cross_k, cross_v = encode_bound(model.encoder, ids, mask, model.layers, model.heads, model.head_dim,
                                            model.cross_align, pool=pool, call_positions=10**9)  # one call
    assert buffer is spare and pool.spare_bytes == 0
    assert len(cross_k) == len(cross_v) == model.layers
    for mine, theirs in zip(cross_k + cross_v, expected_k + expected_v):
        assert mine.shape == theirs.shape == (rows, model.heads, aligned, model.head_dim)
        np.testing.assert_array_equal(mine, theirs)
        assert np.shares_memory(mine, buffer)


def _best_split_cost(widths: list[int], call: int) -> int:
    """The cheapest split of sorted widths into runs, by trying every one (2^(n-1) of them)."""
    n, best = len(widths), None
    for cuts in range(1 << (n - 1)):
        cost, start = 0, 0
        for end in range(1, n + 1):
            if end == n or cuts >> (end - 1) & 1:
                cost += (end - start) * widths[end - 1] + call
                start = end
        best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_encoder_groups_are_the_cheapest_split_of_the_rows(seed):
    """Random batches (spread lengths, equal lengths, short rows with a long tail; alignments
    1 and 16; calls free, cheap and dear): the groups partition the rows, shortest first
    and without interleaving, and no split of the sorted rows runs fewer positions, calls
    counted."""
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(1, 10))
    kind = seed % 3
    lengths = (rng.integers(3, 40, rows) if kind == 0 else np.full(rows, int(rng.integers(3, 40))) if kind == 1
               else np.concatenate([rng.integers(3, 12, rows), rng.integers(100, 300, 2)]))
    align = (1, SOURCE_ALIGN)[seed % 2]
    for call in (0, 8, 10**6):
        groups = encoder_groups(lengths, align, call)
        assert sorted(np.concatenate(groups).tolist()) == list(range(len(lengths)))
        width = -(-lengths // align) * align
        cost = sum(len(g) * int(width[g].max()) + call for g in groups)
        assert cost == _best_split_cost(sorted(width.tolist()), call)
        for before, after in zip(groups, groups[1:]):
            assert lengths[before].max() <= lengths[after].min()
        if call == 10**6 or len(set(width.tolist())) == 1:
            assert len(groups) == 1


def test_encoder_groups_count_an_empty_row_as_one_position():
    """A row with no positions still needs one in an encoder call: it groups as length 1."""
    assert [g.tolist() for g in encoder_groups([0, 0, 50], 1, 0)] == [[0, 1], [2]]
    assert [g.tolist() for g in encoder_groups([0, 1], 1, 0)] == [[0, 1]]


@pytest.mark.parametrize("rows, seed", [(4, 8), (13, 21)])
def test_encode_bound_in_groups_writes_each_rows_own_cross_kv(graph_parts, rows, seed):
    """A batch with a long tail, encoded in groups (every split taken: calls cost nothing):
    each row's cross K/V over its source are the encoder's for that row (to float
    rounding), the positions past its group's are zeros, nothing is left unwritten, and the
    groups' buffers go back to the pool."""
    bundle, tokenizer, model = graph_parts
    sources = _sources(graph_parts, rows, seed)
    sources[1] = (sources[1][:-1] * 6)[: bundle.max_positions - 1] + [bundle.eos_id]  # far longer than the rest
    ids, mask = model.pad(sources)
    lengths = mask.sum(1)
    groups = encoder_groups(lengths, model.cross_align, 0)
    assert len(groups) > 1
    pool = BufferPool(spares=4)
    aligned = -(-ids.shape[1] // model.cross_align) * model.cross_align
    spare = pool.take(2 * model.layers * rows * model.heads * aligned * model.head_dim)
    spare[:] = np.nan  # whatever was there before must all be overwritten
    pool.give(spare)
    buffer, cross_k, cross_v = encode_bound(model.encoder, ids, mask, model.layers, model.heads, model.head_dim,
                                            model.cross_align, pool=pool, call_positions=0)
    assert buffer is spare and pool.spare_bytes > 0  # the groups' own buffers came back
    for group in groups:
        width = int(lengths[group].max())
        held = -(-width // model.cross_align) * model.cross_align
        for row in group:
            alone_k, alone_v = model.encode(ids[row:row + 1, :width], mask[row:row + 1, :width])
            real = int(lengths[row])  # positions past a row's source are masked: any finite value goes
            for mine, theirs in zip([c[row] for c in cross_k + cross_v], alone_k + alone_v):
                assert mine.shape == (model.heads, aligned, model.head_dim)
                np.testing.assert_allclose(mine[:, :real], theirs[0][:, :real], rtol=1e-4, atol=1e-5)
                assert np.isfinite(mine).all()
                assert not mine[:, held:].any()


class _FailingEncoder:
    """An encoder session whose ``fail_at``-th IO-binding call raises, as ONNX Runtime would."""

    def __init__(self, inner, fail_at: int):
        self.inner, self.fail_at, self.calls = inner, fail_at, 0

    def io_binding(self):
        return self.inner.io_binding()

    def run_with_iobinding(self, binding, run_options=None):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : injected failure")
        return self.inner.run_with_iobinding(binding, run_options)


@pytest.mark.parametrize("fail_at", [1, 2])
def test_a_failing_group_call_gives_every_buffer_back(fp32_parts, fail_at):
    """ONNX Runtime failing in the first or a later group's call: the error reaches the
    caller, and the batch's buffer and the group's spare are both back in the pool."""
    bundle, tokenizer, model = fp32_parts
    sources = _sources(fp32_parts, 5, 9)
    sources[2] = (sources[2][:-1] * 6)[: bundle.max_positions - 1] + [bundle.eos_id]
    ids, mask = model.pad(sources)
    assert len(encoder_groups(mask.sum(1), model.cross_align)) >= fail_at
    taken, given = [], []

    class Counting(BufferPool):
        def take(self, count):
            taken.append(super().take(count))
            return taken[-1]

        def give(self, buffer):
            given.append(buffer)
            super().give(buffer)

    encoder = _FailingEncoder(model.encoder, fail_at)
    with pytest.raises(RuntimeError, match="injected failure"):
        encode_bound(encoder, ids, mask, model.layers, model.heads, model.head_dim, model.cross_align,
                     pool=Counting(spares=8))
    assert encoder.calls == fail_at
    assert len(taken) == fail_at + 1  # the batch's buffer, and one spare a group tried
    assert sorted(map(id, given)) == sorted(map(id, taken))


def test_encoding_in_groups_changes_no_output(graph_parts, tie_counter, monkeypatch):
    """Greedy outputs of a batch with a long tail are the same whether its encoder ran in
    groups or in one call (near-ties aside): the decoder masks what the groups leave as zeros."""
    import edge_translator.core.iobinding as iobinding

    bundle, tokenizer, model = graph_parts
    sources = _sources(graph_parts, 9, 17)
    sources[4] = (sources[4][:-1] * 5)[: bundle.max_positions - 1] + [bundle.eos_id]
    lengths = [len(s) for s in sources]
    assert len(encoder_groups(lengths, model.cross_align)) > 1
    scorer = onnx_next_logprobs(model)
    grouped = model.greedy_all(sources, 20)
    monkeypatch.setattr(iobinding, "ENCODER_CALL_POSITIONS", 10**9)
    assert len(encoder_groups(lengths, model.cross_align)) == 1
    whole = model.greedy_all(sources, 20)
    for src, mine, theirs in zip(sources, grouped, whole):
        assert_equal_or_tie(tie_counter, src, mine.ids, theirs.ids, lambda: greedy_tie(
            src, mine.ids, theirs.ids, bundle.eos_id, scorer, mine.stop == "eos", theirs.stop == "eos"))


def test_bound_decoder_refuses_a_cross_buffer_its_views_are_not_from(fp32_parts):
    _, _, model = fp32_parts
    ids, mask = model.pad(_sources(fp32_parts, 2, 4))
    buffer, cross_k, cross_v = encode_bound(model.encoder, ids, mask, model.layers, model.heads, model.head_dim,
                                    model.cross_align)
    copies_k, copies_v = model.encode(ids, mask)
    with pytest.raises(ValueError, match="views of cross_buffer"):
        BoundDecoder(model.decoder, copies_k, copies_v, mask, model.logits_width, cross_buffer=buffer)


@pytest.mark.parametrize("encoded", [False, True], ids=["copied", "encoded-in-place"])
def test_bound_decoder_computes_what_the_plain_calls_compute(graph_parts, encoded):
    """Step by step, over capacity growth and rows leaving, the logits and the K/V are the
    plain ``Seq2Seq.step``'s, fed the same tokens, whether the cross K/V were copied in or
    written there by the encoder."""
    bundle, _, model = graph_parts
    sources = _sources(graph_parts, 5, 11)
    ids, mask = model.pad(sources)
    cross_k, cross_v = model.encode(ids, mask)
    if encoded:
        buffer, own_k, own_v = encode_bound(model.encoder, ids, mask, model.layers, model.heads, model.head_dim,
                                    model.cross_align)
        bound = BoundDecoder(model.decoder, own_k, own_v, mask, model.logits_width, capacity=2,
                             ragged=model.ragged, cross_buffer=buffer)
        del own_k, own_v
    else:
        bound = BoundDecoder(model.decoder, cross_k, cross_v, mask, model.logits_width, capacity=2,
                             ragged=model.ragged)
    past_k, past_v = model.empty_cache(len(sources)), model.empty_cache(len(sources))
    tokens = np.full((len(sources), 1), bundle.decoder_start_id, np.int64)
    for step in range(10):
        mine = bound.step(tokens)
        logits, past_k, past_v = model.step(tokens, mask, past_k, past_v, cross_k, cross_v)
        np.testing.assert_allclose(mine, logits, rtol=0, atol=1e-5)
        for layer in range(model.layers):
            np.testing.assert_allclose(bound.kv.past(layer), past_k[layer], rtol=0, atol=1e-6)
            np.testing.assert_allclose(bound.kv.past(model.layers + layer), past_v[layer], rtol=0, atol=1e-6)
        tokens = model.next_tokens(logits[:, -1, :].copy()).reshape(-1, 1).astype(np.int64)
        slots = {2: [0, 2, 3, 4], 5: [1, 3], 7: [1]}.get(step)
        if slots is not None:
            idx = np.asarray(slots)
            bound.keep(idx)
            mask, tokens = mask[idx], tokens[idx]
            cross_k, cross_v = [c[idx] for c in cross_k], [c[idx] for c in cross_v]
            past_k, past_v = [p[idx] for p in past_k], [p[idx] for p in past_v]
    assert bound.kv.capacity == 10 and bound.kv.rows == 1  # 10 positions, grown by 2


def test_greedy_batches_decode_the_same_with_and_without_binding(graph_parts, tie_counter):
    bundle, _, model = graph_parts
    assert model.binds  # real sessions take the bound path
    plain = copy.copy(model)
    plain.binds = plain.binds_encoder = False
    sources = _sources(graph_parts, 24, 5)
    limits = [4 + (7 * k) % 40 for k in range(len(sources))]  # rows stop at many different steps
    bound_out = model.greedy_all(sources, limits)
    plain_out = plain.greedy_all(sources, limits)
    scorer = onnx_next_logprobs(model)
    for src, mine, ref in zip(sources, bound_out, plain_out):
        assert_equal_or_tie(tie_counter, src, mine.ids, ref.ids, lambda: greedy_tie(
            src, mine.ids, ref.ids, bundle.eos_id, scorer, mine.stop == "eos", ref.stop == "eos"))
    assert sum(h.stop == "length" for h in bound_out) > 0 and sum(h.stop == "eos" for h in bound_out) > 0


@pytest.mark.parametrize("how", ["finished", "dropped"])
def test_a_batch_hands_its_memory_to_the_pool_when_no_row_is_left(fp32_parts, how):
    """Whoever still holds the batch object, its buffers go back to the model's pool once it
    has no rows, and are unmapped when the pool lets them go."""
    model = fp32_parts[2]
    model.buffers.clear()
    sources = _sources(fp32_parts, 6, 3)
    batch = GreedyBatch(model, sources, [12] * len(sources))
    batch.step()
    bound = batch._bound
    held = [weakref.ref(_mapping(a)) for a in (*bound.kv.buffers, *bound._owned)]
    del bound
    gc.disable()  # nothing may depend on the cycle collector
    try:
        if how == "finished":
            while not batch.done:
                batch.step()
        else:
            batch.drop(range(len(sources)))
        assert batch.done
        assert model.buffers.spare_bytes > 0
        model.buffers.clear()
        assert [r() for r in held] == [None] * len(held)
    finally:
        gc.enable()


def test_the_next_batch_reuses_the_pools_buffers(fp32_parts):
    model = fp32_parts[2]
    model.buffers.clear()
    sources = _sources(fp32_parts, 6, 4)
    first = GreedyBatch(model, sources, [8] * len(sources))
    first.step()
    left = {b.ctypes.data for b in (*first._bound.kv.buffers, *first._bound._owned)}
    while not first.done:
        first.step()
    second = GreedyBatch(model, sources[:3], [8] * 3)  # smaller: it fits in what the first left
    second.step()
    taken = {b.ctypes.data for b in (*second._bound.kv.buffers, *second._bound._owned)}
    assert taken <= left


def test_buffer_pool_hands_out_the_smallest_fit_and_keeps_the_largest_spares():
    pool = BufferPool(spares=2)
    small, middle, large = pool.take(10), pool.take(100), pool.take(1000)
    assert len(small) >= 10 and len(middle) >= 100 and len(large) >= 1000
    for b in (small, middle, large):
        pool.give(b)
    assert pool.spare_bytes == (len(middle) + len(large)) * 4  # the smallest went
    assert pool.take(50) is middle
    assert pool.take(50) is large
    fresh = pool.take(50)
    assert fresh is not middle and fresh is not large and len(fresh) >= 50


def test_buffer_pool_lets_spares_go_that_no_batch_took_in_time():
    """A spare kept for a rare large batch must not hold its memory for good: it goes when
    it has not been taken within ``max_age_s``, while one given back again stays."""
    now = [100.0]
    pool = BufferPool(spares=3, max_age_s=2.0, clock=lambda: now[0])
    rare, usual = pool.take(5000), pool.take(100)
    pool.give(rare)
    pool.give(usual)
    for _ in range(4):  # the usual batches come and go; the rare buffer is never asked for
        now[0] += 0.9
        assert pool.take(100) is usual
        pool.give(usual)
    assert pool.spare_bytes == len(usual) * 4  # 3.6 s on, the rare one went
    ref = weakref.ref(_mapping(rare))
    del rare
    gc.collect()
    assert ref() is None  # unmapped
    now[0] += 2.5
    fresh = pool.take(100)
    assert fresh is not usual and pool.spare_bytes == 0  # too old to lend as well
    with pytest.raises(ValueError, match="must not be negative"):
        BufferPool(max_age_s=-1)


def test_a_large_spare_lent_for_a_small_batch_gives_its_tail_pages_back():
    """Lent for fewer values than it holds, a spare keeps only the pages those values need;
    the rest are handed back to the system (they read as zeros until written again)."""
    import mmap

    pool = BufferPool(spares=1)
    large = pool.take(1 << 20)
    large[:] = 1.0
    pool.give(large)
    lent = pool.take(1000)
    assert lent is large
    kept = -(-1000 * 4 // mmap.PAGESIZE) * mmap.PAGESIZE // 4  # whole pages
    assert lent[:kept].min() == 1.0 and not lent[kept:].any()
    lent[kept:] = 2.0  # still a writable buffer of its whole length
    assert lent[-1] == 2.0


class _Outputs:
    """Just enough of a session to name its outputs' axes."""

    def __init__(self, *axes):
        self.axes = axes

    def get_outputs(self):
        from types import SimpleNamespace

        return [SimpleNamespace(name="last_hidden_state", shape=["batch", "source_length", 8])] + [
            SimpleNamespace(name=f"cross_key.{k}", shape=["batch", 2, axis, 4]) for k, axis in enumerate(self.axes)]


def test_cross_alignment_is_read_from_the_encoder_outputs_axis_names(fp32_parts):
    assert cross_alignment(_Outputs("source_length", "source_length")) == 1
    assert cross_alignment(_Outputs("aligned_source_length")) == SOURCE_ALIGN
    # a graph written otherwise: its output shapes are not known before the call, so no binding
    assert cross_alignment(_Outputs("s")) is None
    assert cross_alignment(_Outputs("source_length", "aligned_source_length")) is None
    assert cross_alignment(_Outputs(7)) is None
    assert fp32_parts[2].cross_align == 1  # an FP32 export pads nothing; int8r pads (test_encode_bound above)


def test_shared_kv_seats_new_rows_in_place_until_its_row_capacity_then_lays_out_anew():
    rng = np.random.default_rng(2)
    layers, heads, dim = 2, 3, 4
    kv = SharedKV(layers, 2, heads, dim, capacity=4)
    kv.lengths[:] = [3, 1]
    held = [rng.standard_normal((2, heads, 3, dim)).astype(np.float32) for _ in range(2 * layers)]
    for segment, values in enumerate(held):
        kv.segment(segment)[:, :, :3] = values
    kv.admit(2, row_capacity=6)  # beyond the 2 rows laid out: one copy, room for 6
    assert (kv.rows, kv.row_capacity) == (4, 6) and kv.lengths.tolist() == [3, 1, 0, 0]
    address = kv.address
    kv.keep(np.array([0, 1, 3]))
    kv.admit(3)  # within the 6: nothing moves
    assert kv.address == address and kv.rows == 6 and kv.lengths.tolist() == [3, 1, 0, 0, 0, 0]
    for segment, values in enumerate(held):
        np.testing.assert_array_equal(kv.segment(segment)[0, :, :3], values[0])
        np.testing.assert_array_equal(kv.segment(segment)[1, :, :1], values[1, :, :1])
    kv.admit(1)  # past the capacity with no wish given: exactly the rows held
    assert kv.rows == kv.row_capacity == 7 and kv.address != address
    np.testing.assert_array_equal(kv.segment(0)[0, :, :3], held[0][0])
    with pytest.raises(ValueError, match="at least 1"):
        kv.admit(0)


def _alone(model, sources, limits, min_new_tokens=0):
    return [model.greedy_all([s], [n], min_new_tokens=min_new_tokens)[0] for s, n in zip(sources, limits)]


def check_rows_that_join(parts, tie_counter, seed: int, min_new_tokens: int = 0) -> None:
    """Rows joining a batch at several steps (a source longer than any held among them, so
    the cross K/V grow; more rows than the batch was laid out for; seats that finished rows
    left) decode to what each decodes alone, near-ties aside."""
    bundle, tokenizer, model = parts
    sources = _sources(parts, 19, seed)
    long = tokenizer.encode(" ".join(english_sentences(8, seed + 1)), bundle.targets["zh-Hans"].id)
    long = long[:119] + long[-1:]  # within the model's 128 positions (target token, pieces, </s>)
    assert len(long) >= max(len(s) for s in sources) + SOURCE_SLACK + SOURCE_ALIGN
    sources.insert(7, long)  # joins at the first admission, far longer than all that started
    limits = [3 + (5 * k) % 17 for k in range(len(sources))]  # rows leave at many steps
    limits[7] = 4  # and it leaves early, so that the cross K/V it needed go too
    waves = {0: (0, 5), 2: (5, 11), 4: (11, 13), 9: (13, 20)}  # step -> sources that join then
    batch, results, held = None, {}, []
    for step in range(200):
        if step in waves:
            lo, hi = waves[step]
            if batch is None:
                batch = GreedyBatch(model, sources[lo:hi], limits[lo:hi], min_new_tokens=min_new_tokens)
            else:
                assert batch.can_admit
                assert batch.admit(sources[lo:hi], limits[lo:hi], row_capacity=8) == list(range(lo, hi))
        results.update(batch.step())
        if batch._bound is not None:
            held.append(batch._bound.cross.shape[3])
        if batch.done and step > max(waves):
            break
    assert held[2] >= len(long) and held[-1] < len(long) - SOURCE_SLACK  # the cross K/V grew, then shrank
    assert sorted(results) == list(range(len(sources)))
    scorer = onnx_next_logprobs(model)
    for k, ref in enumerate(_alone(model, sources, limits, min_new_tokens)):
        mine, src = results[k], sources[k]
        assert mine.stop == ref.stop or mine.ids != ref.ids
        assert_equal_or_tie(tie_counter, src, mine.ids, ref.ids, lambda: greedy_tie(
            src, mine.ids, ref.ids, bundle.eos_id, scorer, mine.stop == "eos", ref.stop == "eos"))
        if min_new_tokens:
            assert len(mine.ids) >= min(min_new_tokens, limits[k] - 1)
    assert tie_counter.equal >= 0.9 * tie_counter.compared


@pytest.mark.parametrize("min_new_tokens", [0, 8])
def test_rows_that_join_a_decoding_batch_decode_as_they_do_alone(fp32_parts, tie_counter, min_new_tokens):
    check_rows_that_join(fp32_parts, tie_counter, seed=31, min_new_tokens=min_new_tokens)


def test_a_decoder_without_row_positions_takes_no_rows_once_it_decodes(graph_parts):
    """An earlier bundle's decoder (one past length for every row) refuses rows mid-batch,
    and says so before it takes them; before the first step any batch takes them."""
    _, _, model = graph_parts
    sources = _sources(graph_parts, 4, 6)
    batch = GreedyBatch(model, sources[:2], [6, 6])
    assert batch.can_admit and batch.admit(sources[2:3], [6]) == [2]  # not started: just more rows
    batch.step()
    assert batch.can_admit == model.ragged
    if not model.ragged:
        with pytest.raises(ValueError, match="cannot take rows"):
            batch.admit(sources[3:], [6])
        cross = [np.zeros((1, model.heads, 4, model.head_dim), np.float32)] * model.layers
        with pytest.raises(ValueError, match="ragged decoder graph"):
            batch._bound.admit(cross, cross, np.ones((1, 4), np.int64))
    while not batch.done:
        batch.step()
    assert not batch.can_admit  # a finished batch has given its memory back


@pytest.mark.parametrize("seed", range(40))
def test_compaction_order_moves_only_rows_past_the_kept_ones_into_the_places_left(seed):
    """Any set of rows leaving any batch: the order keeps each row once, leaves the rows that
    fit where they are, moves the others into the places left, and moving them in that order
    in place gives every kept row its own contents, as a copy of the whole batch would."""
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(1, 40))
    slots = np.flatnonzero(rng.random(rows) < rng.random())
    order = compaction_order(slots, rows)
    kept = len(slots)
    assert sorted(order.tolist()) == slots.tolist()
    for i, slot in enumerate(order):
        assert slot == i if slot < kept else i not in set(slots.tolist())
    assert int(np.sum(order != np.arange(kept))) == int(np.sum(slots >= kept))  # the fewest moves
    layers, heads, dim = 2, 2, 3
    kv = SharedKV(layers, rows, heads, dim, capacity=8)
    kv.lengths[:] = rng.integers(0, 9, rows)
    for segment in range(2 * layers):
        kv.segment(segment)[...] = rng.standard_normal(kv.shape).astype(np.float32)
    before = [kv.segment(s).copy() for s in range(2 * layers)]
    lengths = kv.lengths.copy()
    kv.keep(order)
    assert kv.rows == kept and kv.lengths.tolist() == lengths[order].tolist()
    for segment in range(2 * layers):
        for i, slot in enumerate(order):
            np.testing.assert_array_equal(kv.segment(segment)[i, :, : lengths[slot]],
                                          before[segment][slot, :, : lengths[slot]])


def test_compaction_order_refuses_slots_out_of_order_or_out_of_the_batch():
    for slots in ([2, 1], [0, 0], [0, 5]):
        with pytest.raises(ValueError, match="ascending"):
            compaction_order(slots, 5)
    assert compaction_order([], 3).tolist() == []
    assert compaction_order([1, 3, 4], 5).tolist() == [3, 1, 4]  # rows 3 and 4 into places 0 and 2
