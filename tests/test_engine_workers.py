"""Several engine workers: batches decode side by side, each on its own copy of the sessions,
and what a caller gets does not depend on which worker decoded it."""

import threading

import pytest

from edge_translator import Translator
from edge_translator.core.decode import Seq2Seq
from edge_translator.core.engine import Engine, EngineOptions, Priority, Request
from edge_translator.core.errors import TranslationFailed
from edge_translator.toolchain.testmodels import english_sentences

from .test_engine import Recording
from .ties import assert_equal_or_tie, greedy_tie, onnx_next_logprobs
from .waiting import wait_until


def _workers(parts, count):
    """``count`` models sharing the fixture's sessions, each decoder wrapped in its own :class:`Recording`."""
    bundle, _, model = parts
    decoders = [Recording(model.decoder) for _ in range(count)]
    return [Seq2Seq(model.encoder, d, bundle) for d in decoders], decoders


def _requests(parts, count, seed, limit=24):
    bundle, tokenizer, _ = parts
    target = bundle.targets["zh-Hans"].id
    return [Request(tuple(tokenizer.encode(s, target)), limit) for s in english_sentences(count, seed=seed)]


def test_two_workers_decode_two_callers_batches_at_once(fp32_parts):
    """The first caller's batch holds worker A inside its decoder; the second caller's rows
    must start on worker B meanwhile, not wait for A."""
    models, decoders = _workers(fp32_parts, 2)
    for d in decoders:
        d.gate.clear()
    engine = Engine(models, EngineOptions(max_wait_ms=0))
    try:
        first = engine.submit(_requests(fp32_parts, 2, seed=1))
        wait_until(lambda: any(d.entered.is_set() for d in decoders), 30, "the first batch to enter a decoder")
        second = engine.submit(_requests(fp32_parts, 2, seed=2))
        wait_until(lambda: all(d.entered.is_set() for d in decoders), 30,
                   "the second caller's batch to start while the first one's was decoding")
        for d in decoders:
            d.gate.set()
        assert len(list(first.completed(60))) == 2 and len(list(second.completed(60))) == 2
    finally:
        for d in decoders:
            d.gate.set()
        engine.close()
    assert engine.stats().batches == 2


@pytest.mark.parametrize("workers", [2, 3])
def test_a_bulk_job_spread_over_workers_gives_what_one_worker_gives(fp32_parts, tie_counter, workers):
    """Batches of a bulk job go to every worker; each row's output equals one worker's, up to float ties."""
    bundle, tokenizer, model = fp32_parts
    requests = _requests(fp32_parts, 40, seed=7)
    with Engine(model, EngineOptions(max_batch_size=4)) as alone:
        expected = [o.hypothesis for o in alone.submit(requests, Priority.BULK).in_order(120)]
    models, decoders = _workers(fp32_parts, workers)
    with Engine(models, EngineOptions(max_batch_size=4)) as engine:
        got = [o.hypothesis for o in engine.submit(requests, Priority.BULK).in_order(120)]
    assert sum(1 for d in decoders if d.batches) >= 2, [len(d.batches) for d in decoders]
    scorer = onnx_next_logprobs(model)
    for request, mine, ref in zip(requests, got, expected):
        assert_equal_or_tie(tie_counter, list(request.source), list(mine.ids), list(ref.ids), lambda: greedy_tie(
            list(request.source), list(mine.ids), list(ref.ids), bundle.eos_id, scorer,
            mine.stop == "eos", ref.stop == "eos"))


def test_translator_load_gives_each_worker_its_own_sessions(tiny_fp32):
    text = " ".join(english_sentences(12, seed=31))
    with Translator.load(tiny_fp32, threads=1, cache=None) as one:
        expected = [r.text for r in one.translate_iter(text)]
    with Translator.load(tiny_fp32, threads=1, cache=None, workers=2) as two:
        assert two.engine.workers == 2
        first, second = two.engine.models
        assert first is not second and first.decoder is not second.decoder
        assert first.decoder.get_session_options().intra_op_num_threads == 1
        results = list(two.translate_iter(text))
    assert len(results) == len(expected)
    assert sum(a.text == b for a, b in zip(results, expected)) >= len(expected) - 1  # a float tie at most


def test_workers_share_the_cores_by_default(tiny_fp32, monkeypatch):
    import edge_translator.core.translator as translator_module

    monkeypatch.setattr(translator_module, "physical_cores", lambda: 4)
    with Translator.load(tiny_fp32, cache=None, workers=2) as translator:
        assert {m.decoder.get_session_options().intra_op_num_threads for m in translator.engine.models} == {2}


def test_bad_worker_counts_are_refused(tiny_fp32, fp32_parts):
    with pytest.raises(ValueError, match="workers must be at least 1, not 0"):
        Translator.load(tiny_fp32, workers=0)
    with pytest.raises(ValueError, match="at least one model"):
        Engine([])


def test_close_finishes_every_workers_batches_and_stops_them(fp32_parts):
    models, _ = _workers(fp32_parts, 2)
    before = set(threading.enumerate())  # other tests' engines may still be winding down
    engine = Engine(models, EngineOptions(max_batch_size=2))
    ticket = engine.submit(_requests(fp32_parts, 12, seed=3), Priority.BULK)
    mine = [t for t in threading.enumerate() if t.name.startswith("edge-translator-engine") and t not in before]
    assert len(mine) == 2
    engine.close(timeout=60)
    assert ticket.done and len(list(ticket.completed(1))) == 12
    assert not any(t.is_alive() for t in mine)


def test_a_failing_batch_on_one_worker_fails_its_caller_only(fp32_parts):
    bundle, tokenizer, model = fp32_parts
    poison = tokenizer.encode("Poison.", bundle.targets["zh-Hans"].id)
    models = []
    for _ in range(2):
        encoder = Recording(model.encoder)
        encoder.fail_when = lambda feed: any(row[:len(poison)].tolist() == poison for row in feed["input_ids"])
        models.append(Seq2Seq(encoder, Recording(model.decoder), bundle))
    with Engine(models, EngineOptions(max_wait_ms=0)) as engine:
        failing = engine.submit([Request(tuple(poison), 8)])
        with pytest.raises(TranslationFailed, match="ONNX Runtime failed on a batch of 1 sentences"):
            list(failing.completed(60))
        good = _requests(fp32_parts, 6, seed=5)
        assert len(list(engine.submit(good).completed(60))) == len(good)  # both workers go on
        assert engine.stats().failed_batches == 1
