"""The Translator facade on the committed bundles: streaming, options, cache, guard."""

import threading

import pytest

from edge_translator import TranslateOptions, Translator
from edge_translator.core.greedybatch import REPETITION, RepetitionGuard
from edge_translator.core.engine import EngineOptions


@pytest.fixture(scope="module")
def translator(tiny_fp32):
    return Translator.load(tiny_fp32, threads=1)


def test_repetition_guard_cuts_loops_only():
    guard = RepetitionGuard()
    assert guard.loop_start([1, 2, 3, 4, 5, 6]) is None
    assert guard.loop_start([9] + [7] * 11) is None  # 11 repeats of one token are allowed
    assert guard.loop_start([9] + [7] * 12) == 2
    assert guard.loop_start([9, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2]) == 3


def test_stream_matches_translate_and_keeps_structure(translator):
    text = "First sentence. Second one!\n\nThird paragraph?  "
    results = list(translator.translate_iter(text))
    assert [r.source for r in results if r.source] == ["First sentence.", "Second one!", "Third paragraph?"]
    joined = translator.translate(text)
    assert joined == "".join(r.text for r in results[:2]) + "\n\n" + results[2].text + "  "
    assert all(r.options == TranslateOptions() for r in results)


def test_guard_and_limits_change_stop_reason(translator):
    text = "The man and the woman walked to the station with their children."
    free = list(translator.translate_iter(text, TranslateOptions(repetition_guard=False, max_length=60)))[0]
    guarded = list(translator.translate_iter(text, TranslateOptions(max_length=60)))[0]
    assert guarded.ids == free.ids[: len(guarded.ids)]
    if guarded.stop == REPETITION:
        assert len(guarded.ids) < len(free.ids)
    short = list(translator.translate_iter(text, TranslateOptions(max_length=3, repetition_guard=False)))[0]
    assert len(short.ids) <= 3 and short.stop in ("length", "eos")


def test_closing_the_generator_stops_work(translator):
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    stream = translator.translate_iter(text)
    first = next(stream)
    stream.close()
    assert first.source == "Sentence number 0 is here."
    with pytest.raises(StopIteration):
        next(stream)


def test_cache_and_threads_give_the_same_answers(translator):
    texts = [f"Where is room {i}?" for i in range(12)]
    expected = translator.translate_batch(texts)
    results = {}

    def work(k):
        results[k] = translator.translate_batch(texts)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expected for r in results.values())


def test_bad_arguments(translator):
    with pytest.raises(TypeError):
        list(translator.translate_iter(b"bytes"))
    with pytest.raises(ValueError, match="zh-Hans"):
        translator.translate("Hi.", TranslateOptions(target="fr"))
    with pytest.raises(ValueError):
        TranslateOptions(max_length=0)
    assert translator.translate("") == "" and translator.translate("  \n") == "  \n"


def test_translate_batch_equals_one_by_one(translator):
    texts = ["Good morning. Where is the station?", "", "The price is $5.\n\nThank you!", "Hello."]
    one_by_one = [translator.translate(t) for t in texts]
    fresh = Translator(translator.bundle, translator.model, translator.tokenizer, cache=None,
                       engine=EngineOptions(max_batch_size=3))
    assert fresh.translate_batch(texts) == one_by_one


def test_long_sentence_is_split_not_truncated(translator):
    words = [f"word{i % 50}" for i in range(400)]
    text = " ".join(words[:200]) + ", " + " ".join(words[200:]) + "."
    results = list(translator.translate_iter(text))
    limit = translator.bundle.max_positions - 2
    assert len(results) > 2
    assert all(len(translator.tokenizer.pieces_of(r.source)) <= limit for r in results)
    assert "".join(r.source + r.separator for r in results) == text


def test_invalid_unicode_is_refused(translator):
    from edge_translator.core.errors import InputError

    with pytest.raises(InputError, match="surrogate"):
        translator.translate("bad \udcff text")


def test_beam_option_decodes_and_differs_in_cache_key(translator):
    text = "Where is the train station? The children walked home."
    greedy = translator.translate(text)
    beam = translator.translate(text, TranslateOptions(beam_size=4))
    assert beam and greedy
    results = list(translator.translate_iter(text, TranslateOptions(beam_size=4)))
    assert all(r.options.beam_size == 4 and r.stop in ("eos", "length") for r in results)
    with pytest.raises(ValueError, match="beam_size"):
        TranslateOptions(beam_size=0)
