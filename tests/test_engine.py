"""The shared scheduler: batches across callers, streaming, cancel, back-pressure, failures, close."""

import threading
import time

import numpy as np
import pytest

from edge_translator import TranslateOptions, Translator
from edge_translator.core.cache import LRUCache
from edge_translator.core.decode import Seq2Seq
from edge_translator.core.engine import Engine, EngineOptions, Priority, Request
from edge_translator.core.errors import Busy, EngineClosed, InputError, TranslationFailed
from edge_translator.core.punctuation import chinese_punctuation
from edge_translator.toolchain.testmodels import english_sentences

from .ties import assert_equal_or_tie, greedy_tie, onnx_next_logprobs
from .waiting import wait_until


class Recording:
    """Wraps a session: records the batch size of each call, can slow down, block or fail."""

    def __init__(self, inner, delay=0.0):
        self.inner = inner
        self.delay = delay
        self.batches: list[int] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()  # set once a call has begun (before the gate)
        self.fail_when = None  # feed -> bool
        self.lock = threading.Lock()

    def get_inputs(self):
        return self.inner.get_inputs()

    def run(self, names, feed):
        self.entered.set()
        self.gate.wait(30)
        with self.lock:
            self.batches.append(int(feed["input_ids"].shape[0]))
        if self.fail_when is not None and self.fail_when(feed):
            raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : injected failure")
        if self.delay:
            time.sleep(self.delay)
        return self.inner.run(names, feed)


@pytest.fixture(scope="module")
def parts(fp32_parts):
    return fp32_parts


def make(parts, delay=0.0, cache=None, **engine):
    """A translator whose decoder session is wrapped in :class:`Recording`."""
    bundle, tokenizer, model = parts
    decoder = Recording(model.decoder, delay)
    wrapped = Seq2Seq(model.encoder, decoder, bundle)
    return Translator(bundle, wrapped, tokenizer, cache=cache, engine=EngineOptions(**engine)), decoder


TEXTS = [" ".join(english_sentences(3, seed=100 + k)) for k in range(12)]


def _idle(engine) -> bool:
    """Whether the engine has no row waiting and none decoding (what it will do, it has done)."""
    stats = engine.stats()
    return stats.queued == 0 and stats.decoding == 0


def test_concurrent_callers_share_batches_and_get_their_own_results(parts, tie_counter):
    bundle, tokenizer, model = parts
    alone, _ = make(parts)
    expected = {k: list(alone.translate_iter(t)) for k, t in enumerate(TEXTS)}
    alone.close()
    shared, decoder = make(parts, delay=0.002)
    got: dict[int, list] = {}

    def call(k):
        got[k] = list(shared.translate_iter(TEXTS[k]))

    threads = [threading.Thread(target=call, args=(k,)) for k in range(len(TEXTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    shared.close()
    assert max(decoder.batches) > 3, decoder.batches  # sentences of different callers decoded together
    scorer = onnx_next_logprobs(model)
    target = bundle.targets["zh-Hans"].id
    for k, results in expected.items():
        assert [r.source for r in got[k]] == [r.source for r in results]
        for mine, ref in zip(got[k], results):
            src = tokenizer.encode(mine.source, target)
            assert_equal_or_tie(tie_counter, src, mine.ids, ref.ids, lambda: greedy_tie(
                src, mine.ids, ref.ids, bundle.eos_id, scorer, mine.stop == "eos", ref.stop == "eos"))


def test_results_carry_span_score_timing_and_ids(parts):
    translator, _ = make(parts)
    text = "  Good morning. Where is the station?\n\nThank you!  "
    submission = translator.submit(text)
    assert len(submission) == len(list(translator._segments(text, TranslateOptions())))
    results = list(submission)
    assert len(results) == len(submission)
    for r in results:
        assert text[r.span[0]:r.span[1]] == r.source
        if r.source.strip():
            assert r.ids and r.score < 0 and np.isfinite(r.score)
            assert r.timing.queued >= 0 and r.timing.decoding > 0
            assert chinese_punctuation(translator.tokenizer.decode(r.ids)) == r.text
    translator.close()


def test_completion_order_yields_every_sentence_once(parts):
    translator, _ = make(parts)
    text = " ".join(english_sentences(20, seed=5))
    in_order = [r.source for r in translator.submit(text)]
    completed = [r.source for r in translator.submit(text, order="completion")]
    assert sorted(completed) == sorted(in_order) and len(completed) == 20
    with pytest.raises(ValueError, match="order"):
        translator.submit(text, order="random")
    translator.close()


def test_cancel_stops_that_owner_only(parts):
    translator, decoder = make(parts, delay=0.003, max_batch_size=4)
    long_text = " ".join(english_sentences(60, seed=9))
    other_text = " ".join(english_sentences(6, seed=10))
    bulk = translator.submit(long_text, priority=Priority.BULK)
    other = translator.submit(other_text)
    stream = iter(bulk)
    next(stream)
    bulk.cancel()
    calls_at_cancel = len(decoder.batches)
    other_results = list(other)
    assert len(other_results) == len(other) and all(r.text for r in other_results)
    wait_until(lambda: _idle(translator.engine), 60, "the engine to have nothing left to decode")
    translator.close()
    # 60 sentences in batches of 4 need far more steps than were run after the cancel
    assert len(decoder.batches) - calls_at_cancel < 60
    assert list(stream) == [] and bulk.cancelled
    clean, _ = make(parts)
    assert "".join(r.text for r in other_results) == "".join(r.text for r in clean.submit(other_text))
    clean.close()


def test_closing_the_generator_cancels(parts):
    translator, decoder = make(parts, delay=0.003, max_batch_size=2)
    stream = translator.translate_iter(" ".join(english_sentences(40, seed=11)))
    next(stream)
    stream.close()
    calls = len(decoder.batches)
    wait_until(lambda: _idle(translator.engine), 60, "the engine to have nothing left to decode")
    assert len(decoder.batches) - calls <= 2  # at most the step in flight
    translator.close()


def test_back_pressure_blocks_or_raises_busy(parts):
    translator, decoder = make(parts, max_queued=4, max_batch_size=2, max_interactive_batches=1)
    decoder.gate.clear()  # the worker blocks in its first decoder call
    first = translator.submit("One. Two.")      # taken by the worker
    assert decoder.entered.wait(30)  # which now waits at the gate, the queue empty
    held = translator.submit("Three. Four. Five. Six.")  # fills the queue (4 waiting)
    with pytest.raises(Busy, match="queue is full"):
        translator.submit("Seven.", block=False)
    started = time.perf_counter()
    with pytest.raises(Busy):
        translator.submit("Seven.", timeout=0.2)
    assert time.perf_counter() - started >= 0.2
    unblocked = threading.Timer(0.3, decoder.gate.set)
    unblocked.start()
    late = translator.submit("Seven.")  # blocks until the worker takes rows, then goes through
    assert [len(list(s)) for s in (first, held, late)] == [2, 4, 1]
    assert translator.engine.queued == 0
    translator.close()


def test_bad_input_fails_at_submit_time(parts):
    translator, _ = make(parts)
    with pytest.raises(ValueError, match="not offered"):
        translator.submit("Hello.", TranslateOptions(target="fr"))
    with pytest.raises(InputError, match="surrogate"):
        translator.submit("bad \udcff text")
    with pytest.raises(TypeError):
        translator.submit(b"bytes")
    assert translator.translate("Still works.")
    translator.close()


def test_a_failing_batch_fails_its_submissions_and_the_engine_goes_on(parts):
    translator, _ = make(parts)
    encoder = Recording(translator.model.encoder)
    translator.model.encoder = encoder
    poison = translator.tokenizer.encode("Poison.", translator.bundle.targets["zh-Hans"].id)
    encoder.fail_when = lambda feed: any(row[:len(poison)].tolist() == poison for row in feed["input_ids"])
    failing = translator.submit("Poison.")
    with pytest.raises(TranslationFailed, match="ONNX Runtime failed on a batch of 1 sentences: .*injected"):
        list(failing)
    assert translator.translate("Hello there.")  # the next batch, without the poison, works
    with pytest.raises(TranslationFailed):
        translator.translate("Poison.")
    encoder.fail_when = None
    assert translator.translate("Poison.")
    translator.close()


def test_close_finishes_queued_work_and_is_idempotent(parts):
    translator, _ = make(parts, delay=0.002)
    submission = translator.submit(" ".join(english_sentences(10, seed=3)))
    translator.close()
    assert len(list(submission)) == 10  # finished, not dropped
    translator.close()
    with pytest.raises(EngineClosed):
        translator.submit("More.")
    with make(parts)[0] as t:
        assert t.translate("Hello.")
    with pytest.raises(EngineClosed):
        t.translate("Hello.")


def test_close_with_cancel_drops_queued_work(parts):
    text = " ".join(english_sentences(30, seed=4))
    whole, whole_decoder = make(parts, max_batch_size=2)
    assert len(list(whole.submit(text))) == 30
    whole.close()
    translator, decoder = make(parts, delay=0.003, max_batch_size=2)
    submission = translator.submit(text)
    assert decoder.entered.wait(30)  # decoding has begun
    translator.close(cancel=True)
    assert len(list(submission)) < 30 and submission.cancelled
    # the queued work was dropped, not decoded: far fewer decoder steps than the whole text takes
    assert len(decoder.batches) < len(whole_decoder.batches) / 4, (len(decoder.batches), len(whole_decoder.batches))


def test_interactive_work_goes_ahead_of_bulk(parts):
    translator, decoder = make(parts, delay=0.002, max_batch_size=4)
    finished = []
    bulk = translator.submit(" ".join(english_sentences(80, seed=6)), priority=Priority.BULK, order="completion")
    consumer = threading.Thread(target=lambda: [finished.append("bulk") for _ in bulk])
    consumer.start()
    assert decoder.entered.wait(30)  # the bulk job is decoding
    list(translator.submit("Where is the station?"))
    finished.append("interactive")
    consumer.join(60)
    position = finished.index("interactive")
    assert position < 40, position  # answered long before the bulk job's end
    translator.close()


def test_owners_are_interleaved_fairly(parts):
    bundle, tokenizer, model = parts
    engine = Engine(Seq2Seq(model.encoder, Recording(model.decoder, 0.002), bundle),
                    EngineOptions(max_batch_size=4, max_bulk_batches=1))
    target = bundle.targets["zh-Hans"].id
    first = [Request(tuple(tokenizer.encode(s, target)), 12) for s in english_sentences(40, seed=7)]
    second = [Request(tuple(tokenizer.encode(s, target)), 12) for s in english_sentences(4, seed=8)]
    a = engine.submit(first, Priority.BULK)
    b = engine.submit(second, Priority.BULK)
    done_b = list(b.in_order())
    done_a_when_b_done = sum(r is not None for r in a._results)
    assert len(done_b) == 4 and done_a_when_b_done < 30  # b did not wait for a's 40 rows
    list(a.in_order())
    engine.close()


def test_cache_is_pluggable_and_keyed_by_model_and_options(parts):
    cache = LRUCache(100)
    translator, decoder = make(parts, cache=cache)
    text = "Where is the station? Where is the station?"
    first = list(translator.translate_iter(text))
    calls = len(decoder.batches)
    again = list(translator.translate_iter(text))
    assert len(decoder.batches) == calls and all(r.cached for r in again)  # no decoding at all
    assert [r.text for r in again] == [r.text for r in first]
    assert len(cache) == 1  # one sentence, twice in the text, decoded and stored once
    key = next(iter(cache._data))
    assert key.model == translator.model_id and key.target == "zh-Hans"
    list(translator.translate_iter(text, TranslateOptions(max_length=5)))
    assert len(decoder.batches) > calls and len(cache) == 2  # another option is another key
    other, _ = make(parts, cache=None)
    assert other.cache is None and not any(r.cached for r in other.translate_iter(text))
    translator.close()
    other.close()


def test_targets_and_options_share_a_batch(parts):
    translator, decoder = make(parts, delay=0.005)
    texts = [(" ".join(english_sentences(2, seed=k)), TranslateOptions(target=t, max_length=m))
             for k, (t, m) in enumerate([("zh-Hans", None), ("zh-Hant", 12), ("zh-Hans", 6), ("zh-Hant", None)])]
    submissions = [translator.submit(text, options) for text, options in texts]
    results = [list(s) for s in submissions]
    assert max(decoder.batches) >= 4
    assert all(len(r.ids) <= 6 for r in results[2])
    translator.close()


@pytest.mark.parametrize("interval_ms, progresses", [(20.0, True), (1e9, False)])
def test_bulk_work_is_delayed_not_starved(parts, interval_ms, progresses):
    translator, _ = make(parts, delay=0.002, bulk_step_interval_ms=interval_ms, max_batch_size=8)
    interactive = translator.submit(" ".join(english_sentences(80, seed=13)))  # keeps a batch busy throughout
    bulk = translator.submit(" ".join(english_sentences(30, seed=12)), priority=Priority.BULK)
    assert len(list(interactive)) == 80
    done = sum(r is not None for r in bulk._ticket._results)
    assert (done > 0) == progresses, done
    translator.close(cancel=True)


def test_stats_count_batches_rows_tokens_and_failures(parts):
    translator, decoder = make(parts, max_batch_size=4)
    assert translator.engine.stats().batches == 0
    results = list(translator.submit(" ".join(english_sentences(6, seed=31))))
    stats = translator.engine.stats()
    assert stats.rows_done == 6 and stats.tokens == sum(len(r.ids) for r in results)
    assert stats.batches == sum(stats.batch_sizes.values()) >= 2 and max(stats.batch_sizes) <= 4
    assert sum(size * n for size, n in stats.batch_sizes.items()) == 6
    assert stats.steps == len(decoder.batches) and stats.queued == 0 and stats.decoding == 0
    decoder.fail_when = lambda feed: True
    with pytest.raises(TranslationFailed):
        translator.translate("This one fails.")
    assert translator.engine.stats().failed_batches == 1
    translator.close()


def test_session_options_threads_and_spinning():
    from edge_translator.core.sessions import session_options

    options = session_options(3)
    assert options.intra_op_num_threads == 3 and options.inter_op_num_threads == 1
    with pytest.raises(RuntimeError):  # not set: ONNX Runtime's default, spinning
        options.get_session_config_entry("session.intra_op.allow_spinning")
    assert session_options(2, spin=False).get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.enable_cpu_mem_arena and not session_options(2, arena=False).enable_cpu_mem_arena
    with pytest.raises(ValueError):
        session_options(0)


def test_the_encoder_never_spins_and_the_decoder_as_asked(tiny_fp32):
    """The encoder's threads spinning on after its call took the cores from the decoder's
    first steps (see ``ENCODER_SPINS``)."""
    from edge_translator.core.bundle import load_bundle

    key = "session.intra_op.allow_spinning"
    bundle = load_bundle(tiny_fp32)
    for spin in (True, False):
        model = Seq2Seq.load(bundle, threads=2, spin=spin)
        assert model.encoder.get_session_options().get_session_config_entry(key) == "0"
        options = model.decoder.get_session_options()
        if spin:
            with pytest.raises(RuntimeError):  # not set: ONNX Runtime's default, spinning
                options.get_session_config_entry(key)
        else:
            assert options.get_session_config_entry(key) == "0"


def test_memory_modes_give_the_same_translations(tiny_fp32):
    from edge_translator.core.bundle import load_bundle

    bundle = load_bundle(tiny_fp32)
    text = " ".join(english_sentences(4, seed=41))
    outputs = {}
    for memory in ("arena", "steady", "shrink", "none"):
        model = Seq2Seq.load(bundle, threads=1, memory=memory)
        assert (model.run_options is not None) == (memory == "shrink")
        # "steady": only the encoder's arena gives back after each call; the decoder keeps its own
        assert (model.encoder_run_options is not None) == (memory in ("steady", "shrink"))
        if model.encoder_run_options is not None:
            assert model.encoder_run_options.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
        with Translator.load(tiny_fp32, threads=1, cache=None, memory=memory) as translator:
            outputs[memory] = [r.ids for r in translator.translate_iter(text)]
    assert outputs["arena"] == outputs["steady"] == outputs["shrink"] == outputs["none"]
    with pytest.raises(ValueError, match="memory must be one of"):
        Seq2Seq.load(bundle, memory="tight")


@pytest.mark.parametrize("rows", [1, 2, 7, 33])
def test_the_log_normalizer_gives_the_bits_of_the_plain_expression(rows):
    """The per-step log-normaliser works in a reused buffer; that must not change a bit of
    any row's score (strided logits as the decoder returns them, a larger buffer's head)."""
    from edge_translator.core.greedybatch import _log_normalizer

    rng = np.random.default_rng(rows)
    logits = (rng.standard_normal((rows, 3, 1001)) * 8).astype(np.float32)
    logits[0, -1, 5] = np.float32(60.0)  # one dominant entry
    last = logits[:, -1, :]
    peak = last.max(axis=-1, keepdims=True)
    expected = (np.log(np.exp(last - peak).sum(axis=-1)) + peak[:, 0]).astype(np.float64)
    scratch = np.full((rows + 4, 1001), np.nan, np.float32)[:rows]
    assert np.array_equal(_log_normalizer(last, scratch), expected)
    assert np.array_equal(_log_normalizer(last, scratch), expected)  # the buffer's old contents do not matter


# 1.5 s: long enough that a stalled test thread still sees the spares before they go
@pytest.mark.parametrize("idle_s, released", [(1.5, True), (60.0, False)])
def test_an_idle_engine_gives_its_kept_buffers_back(tiny_fp32, idle_s, released):
    """Finished batches leave their buffers for the next ones; once the engine has had
    nothing to do for ``idle_release_s``, they go back to the system."""
    with Translator.load(tiny_fp32, threads=1, cache=None, engine=EngineOptions(idle_release_s=idle_s)) as translator:
        pool = translator.engine.model.buffers
        translator.translate(" ".join(english_sentences(4, seed=77)))
        assert pool.spare_bytes > 0  # the batch just gave them back, and the engine is not yet idle long
        deadline = time.perf_counter() + idle_s + 3.0 if released else time.perf_counter() + 2.0
        while pool.spare_bytes and time.perf_counter() < deadline:
            time.sleep(0.05)
        assert (pool.spare_bytes == 0) == released
        translator.translate(english_sentences(1, seed=78)[0])  # and it decodes on afterwards
        assert pool.spare_bytes > 0


def test_idle_release_must_not_be_negative():
    with pytest.raises(ValueError, match="idle_release_s"):
        EngineOptions(idle_release_s=-1)


# -- continuous batching ---------------------------------------------------------------------------
def _requests(parts, count, seed, limit):
    bundle, tokenizer, _ = parts
    target = bundle.targets["zh-Hans"].id
    return [Request(tuple(tokenizer.encode(s, target)), limit) for s in english_sentences(count, seed=seed)]


class _HoldAt:
    """A decoder session that holds its ``at``-th call until :attr:`release` is set."""

    def __init__(self, inner, at: int):
        self.inner, self.at, self.calls = inner, at, 0
        self.reached, self.release = threading.Event(), threading.Event()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _count(self) -> None:
        self.calls += 1
        if self.calls == self.at:
            self.reached.set()
            self.release.wait(30)

    def run(self, *args, **kwargs):
        self._count()
        return self.inner.run(*args, **kwargs)

    def run_with_iobinding(self, *args, **kwargs):
        self._count()
        return self.inner.run_with_iobinding(*args, **kwargs)


def _decode_while_a_batch_runs(bundle_dir, continuous: bool):
    """A batch with one short row and three long ones; once the short one is out, a second
    submission of two rows arrives. Returns the engine's stats and the second's outcomes.

    The decoder is held at its third step (the short row has taken its two) until the
    second submission is queued, so the long rows cannot finish first however slow the
    test thread is."""
    from edge_translator.core.bundle import load_bundle
    from edge_translator.core.tokenizer import Tokenizer

    bundle = load_bundle(bundle_dir)
    tokenizer = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                               bundle.pad_id)
    loaded = Seq2Seq.load(bundle, threads=1)
    held = _HoldAt(loaded.decoder, 3)
    parts = (bundle, tokenizer, loaded)
    engine = Engine(Seq2Seq(loaded.encoder, held, bundle, loaded.normalizer), EngineOptions(continuous=continuous,
                                                                                          min_new_tokens=60))
    first = _requests(parts, 4, 50, 60)
    first[0] = Request(first[0].source, 2)
    late = _requests(parts, 2, 51, 8)
    a = engine.submit(first)
    a.get(0, timeout=30)  # the short row is out; the long ones have about 58 steps to go
    assert held.reached.wait(30)
    b = engine.submit(late)
    wait_until(lambda: engine.queued == len(late), 30, "the late rows to be queued")
    held.release.set()
    second = [b.get(k, timeout=30) for k in range(len(late))]
    rest = list(a.in_order(timeout=60))
    stats = engine.stats()
    engine.close()
    alone = parts[2].greedy_all([list(r.source) for r in late], 8, min_new_tokens=8)
    return stats, second, rest, alone


def test_rows_join_a_running_batch_and_finish_before_it(fp32_parts, tiny_fp32, tie_counter):
    stats, second, rest, alone = _decode_while_a_batch_runs(tiny_fp32, continuous=True)
    assert stats.batches == 1 and stats.admitted == 2  # seated in the batch that was decoding
    assert max(o.timing.decoding for o in second) < min(o.timing.decoding for o in rest[1:])
    assert len(rest) == 4
    bundle, _, model = fp32_parts
    scorer = onnx_next_logprobs(model)
    sources = [list(r.source) for r in _requests(fp32_parts, 2, 51, 8)]
    for src, mine, ref in zip(sources, (o.hypothesis for o in second), alone):  # joined late, in company: the same
        assert_equal_or_tie(tie_counter, src, mine.ids, ref.ids, lambda: greedy_tie(
            src, mine.ids, ref.ids, bundle.eos_id, scorer, mine.stop == "eos", ref.stop == "eos"))


@pytest.mark.parametrize("bundle", ["no-continuous", "legacy-graph"])
def test_without_continuous_batching_late_rows_wait_for_a_batch_of_their_own(tiny_fp32, bundle):
    from .conftest import ROOT

    path = tiny_fp32 if bundle == "no-continuous" else ROOT / "tests" / "fixtures" / "tiny-int8r-127"
    stats, second, _, alone = _decode_while_a_batch_runs(path, continuous=bundle != "no-continuous")
    assert stats.batches == 2 and stats.admitted == 0
    assert [o.hypothesis.ids for o in second] == [h.ids for h in alone]


def test_cancelled_rows_leave_a_batch_that_took_them_and_the_rest_go_on(fp32_parts):
    """Rows admitted to a batch, and the batch's own rows, cancelled at any point around their
    seating: the other owner's rows still decode to their own outputs, in a batch of their
    own once every row seated before them has gone."""
    from edge_translator.core.engine import _Batch, _Row
    from edge_translator.core.ticket import Ticket

    model = fp32_parts[2]
    engine = Engine(model)
    first, late = _requests(fp32_parts, 3, 60, 12), _requests(fp32_parts, 3, 61, 12)
    owners = [Ticket(engine._withdraw, 3), Ticket(engine._withdraw, 3)]
    batch = _Batch(model, [_Row(r, owners[0], k, 0.0) for k, r in enumerate(first)], Priority.INTERACTIVE, 0, 8)
    batch.advance()
    assert batch.can_admit
    batch.admit([_Row(r, owners[1], k, 0.0) for k, r in enumerate(late)])
    owners[0].cancel()  # every seated row goes before the pending ones are seated
    batch.drop_cancelled()
    assert len(batch) == 3
    done = {}
    while len(batch):
        for k, hyp in batch.advance():
            done[batch.rows[k].index] = hyp
    alone = model.greedy_all([list(r.source) for r in late], 12)
    assert [done[k].ids for k in range(3)] == [h.ids for h in alone]


# -- the gather wait ---------------------------------------------------------------------------------
def test_a_lone_caller_starts_at_once_however_long_the_gather(parts):
    """One caller's requests, one after another (a desktop user, a script, a sequential
    client), never wait for a batch-mate: a ten-minute gather would time these out."""
    engine = Engine(parts[2], EngineOptions(max_wait_ms=600_000))
    try:
        for request in _requests(parts, 3, 60, 8):
            assert engine.submit([request]).get(0, timeout=30) is not None
        assert engine.stats().batch_sizes == {1: 3} and engine.stats().gathered == 0
    finally:
        engine.close()


def test_with_other_callers_about_an_idle_engine_gathers_a_batch(parts):
    """Once batches hold several callers' rows, an idle worker waits for a batch-mate."""
    bundle, _, model = parts
    decoder = Recording(model.decoder)
    engine = Engine(Seq2Seq(model.encoder, decoder, bundle), EngineOptions(max_wait_ms=600_000, max_batch_size=2))
    requests = _requests(parts, 5, 61, 8)
    try:
        decoder.gate.clear()
        first = engine.submit([requests[0]])
        assert decoder.entered.wait(30)  # started alone, at once
        second, third = engine.submit([requests[1]]), engine.submit([requests[2]])  # two callers wait meanwhile
        decoder.gate.set()
        for ticket in (first, second, third):
            assert ticket.get(0, timeout=30) is not None
        fourth = engine.submit([requests[3]])
        wait_until(lambda: engine.stats().gathered == 2, what="the worker to wait for a batch-mate")
        fifth = engine.submit([requests[4]])
        assert fourth.get(0, timeout=30) is not None and fifth.get(0, timeout=30) is not None
        assert engine.stats().batch_sizes == {1: 1, 2: 2}  # the lone first; then two callers, twice
    finally:
        decoder.gate.set()
        engine.close()
