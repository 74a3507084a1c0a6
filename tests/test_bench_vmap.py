"""CTranslate2's vocabulary map from our shortlist: the file, the rows CTranslate2 then computes,
and ``ct2-int8-vmap`` in the benchmark and its report (on the tiny fixtures; no speed asserted)."""

import json
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from edge_translator.bench.vmap import VMAP_FILE, vmap_model, write_vmap
from edge_translator.core.bundle import load_bundle
from edge_translator.core.shortlist import Shortlist
from edge_translator.core.tokenizer import Tokenizer
from edge_translator.toolchain import shortlist as sl
from edge_translator.toolchain.testmodels import english_sentences

#: Pairs the test lists are counted on: few, so that most source pieces have copy-through
#: candidates only, and some none.
PAIRS = [("help me", "丈上"), ("help the man", "丈上下"), ("go home", "下上"), ("the dog", "上不"),
         ("water", "上三"), ("Paris", "上")]


@pytest.fixture(scope="module")
def parts(tiny_fp32):
    """``(bundle, tokenizer, vocab)`` of the FP32 fixture."""
    bundle = load_bundle(tiny_fp32)
    tok = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                         bundle.pad_id)
    return bundle, tok, json.loads(bundle.vocab.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def shortlist(parts) -> Shortlist:
    _, tok, _ = parts
    return sl.build_shortlist(tok, sl.corpus_ids(tok, PAIRS), sl.ShortlistOptions(top_k=2, frequent=2))


@pytest.fixture(scope="module")
def ct2_model(tmp_path_factory, tiny_hf) -> Path:
    """The tiny model converted by CTranslate2 (int8), as ``bench --smoke`` converts it."""
    pytest.importorskip("ctranslate2")
    from edge_translator.bench.bench import convert_ct2

    return convert_ct2(tiny_hf, tmp_path_factory.mktemp("ct2") / "tiny-ct2")


def parse_vmap(path: Path) -> dict[str, list[str]]:
    """Source n-gram → targets, read as CTranslate2's ``VocabularyMap`` reads the file
    (``src/vocabulary_map.cc``): the tab ends the source, spaces separate the targets."""
    rules = {}
    for line in path.read_text(encoding="utf-8").split("\n")[:-1]:
        assert line.count("\t") == 1, line
        source, targets = line.split("\t")
        assert " " not in source, line  # one piece: a 1-gram
        assert source not in rules, line
        rules[source] = targets.split(" ") if targets else []
    return rules


# -- the file ---------------------------------------------------------------------------------
def test_vmap_round_trips_to_the_shortlist(tmp_path, parts, shortlist):
    _, tok, vocab = parts
    path = write_vmap(shortlist, vocab, tmp_path)
    assert path == tmp_path / VMAP_FILE
    rules = parse_vmap(path)
    always = rules.pop("")
    assert [vocab[p] for p in always] == shortlist.always.tolist()
    with_candidates = [s for s in range(shortlist.vocab_size) if len(shortlist.candidates_of(s))]
    pieces = {i: p for p, i in vocab.items()}
    assert set(rules) == {pieces[s] for s in with_candidates}
    for s in with_candidates:
        assert [vocab[p] for p in rules[pieces[s]]] == shortlist.candidates_of(s).tolist(), pieces[s]
    # so a sentence's candidate set, read from the file, is the runtime's
    ids = tok.encode("help the dog find water")
    from_file = {vocab[p] for p in always}
    for i in ids:
        from_file |= {vocab[p] for p in rules.get(pieces[i], [])}
    assert sorted(from_file) == shortlist.allowed(ids).tolist()


def test_source_ids_without_candidates_are_skipped(tmp_path, parts, shortlist):
    _, tok, vocab = parts
    empty = [s for s in range(shortlist.vocab_size) if not len(shortlist.candidates_of(s))]
    assert tok.vocab[">>cmn_Hans<<"] in empty and tok.eos_id in empty
    pieces = {i: p for p, i in vocab.items()}
    assert not {pieces[s] for s in empty} & set(parse_vmap(write_vmap(shortlist, vocab, tmp_path)))
    # a hand-made list: two source ids with candidates, two lines besides the always line
    v = len(vocab)
    counts = np.zeros(v, np.int32)
    counts[[vocab["▁help"], vocab["▁water"]]] = [2, 1]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    candidates = np.asarray([vocab["丈"], vocab["下"], vocab["三"]], np.int32)
    if vocab["▁help"] > vocab["▁water"]:
        candidates = candidates[[2, 0, 1]]
    small = Shortlist(np.asarray([tok.eos_id], np.int32), offsets, candidates)
    path = write_vmap(small, vocab, tmp_path)
    assert path.read_text(encoding="utf-8").count("\n") == 3
    assert parse_vmap(path) == {"": ["</s>"], "▁help": ["丈", "下"] if vocab["丈"] < vocab["下"] else ["下", "丈"],
                                "▁water": ["三"]}


def test_vmap_refuses_a_vocabulary_it_cannot_write(tmp_path, parts, shortlist):
    _, _, vocab = parts
    with pytest.raises(ValueError, match="vocab.json of the shortlist's bundle"):
        write_vmap(shortlist, dict(list(vocab.items())[:-1]), tmp_path)
    spaced = Shortlist(np.asarray([1], np.int32), np.zeros(3, np.int32), np.zeros(0, np.int32))
    with pytest.raises(ValueError, match="'b c' \\(id 1\\)"):
        write_vmap(spaced, {"a": 0, "b c": 1}, tmp_path)
    assert not (tmp_path / VMAP_FILE).exists()


def test_vmap_model_is_a_fresh_sibling_and_leaves_the_model_alone(ct2_model, parts, shortlist):
    _, _, vocab = parts
    before = sorted(p.name for p in ct2_model.iterdir())
    out = vmap_model(ct2_model, shortlist, vocab)
    assert out == ct2_model.with_name("tiny-ct2-vmap")
    assert sorted(p.name for p in out.iterdir()) == sorted(before + [VMAP_FILE])
    assert (out / "model.bin").read_bytes() == (ct2_model / "model.bin").read_bytes()
    assert sorted(p.name for p in ct2_model.iterdir()) == before and VMAP_FILE not in before
    (out / "stale").write_text("left by an earlier run")
    assert not (vmap_model(ct2_model, shortlist, vocab) / "stale").exists()


# -- what CTranslate2 does with it ----------------------------------------------------------
def test_ct2_with_the_vmap_computes_exactly_the_shortlisted_rows(ct2_model, parts, shortlist):
    """Batch 1: the logits' columns are the sentence's candidate set, their values the full layer's;
    a batch computes the union of its rows' sets."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    bundle, tok, vocab = parts
    pieces = {i: p for p, i in vocab.items()}
    target = bundle.targets[bundle.default_target].id
    sources = [tok.encode(s, target) for s in english_sentences(12, seed=3)]
    model = vmap_model(ct2_model, shortlist, vocab)

    def run(directory: Path, use_vmap: bool, batch: list[list[int]]):
        translator = ctranslate2.Translator(str(directory), device="cpu", compute_type="int8", intra_threads=1)
        results = translator.translate_batch([[pieces[i] for i in s] for s in batch], beam_size=1,
                                             max_decoding_length=10, min_decoding_length=10, use_vmap=use_vmap,
                                             return_logits_vocab=True)
        return [([vocab[p] for p in r.hypotheses[0]], np.asarray(r.logits[0])) for r in results]

    outside = 0
    for source in sources:
        allowed = shortlist.allowed(source)
        (ids, logits), = run(model, True, [source])
        (full_ids, full), = run(model, False, [source])
        assert set(ids) <= set(allowed.tolist()), (source, ids)
        assert logits.shape == (10, len(allowed))  # on CPU, CTranslate2 pads no columns
        np.testing.assert_allclose(logits[0], full[0, allowed], rtol=1e-5, atol=1e-5)  # the same first step
        outside += not set(full_ids) <= set(allowed.tolist())
    assert outside > 0  # without the map, the random model says other ids: the checks above can fail
    # CTranslate2 ignores use_vmap where the model directory has no vmap.txt
    (_, logits), = run(ct2_model, True, sources[:1])
    assert logits.shape[1] == len(vocab) - 1  # every id but <pad>, which its Marian conversion drops
    union = set(np.concatenate([shortlist.allowed(s) for s in sources]).tolist())
    rows = run(model, True, sources)
    assert all(set(ids) <= union and logits.shape == (10, len(union)) for ids, logits in rows)


# -- the benchmark and its report -----------------------------------------------------------
@pytest.fixture
def shortlisted(bundle_copy, parts, shortlist) -> Path:
    """A copy of the INT8 fixture bundle whose manifest lists ``shortlist``."""
    options = sl.ShortlistOptions(top_k=2, frequent=2)
    entry = sl.write_shortlist(bundle_copy, shortlist, options, "test pairs")
    manifest = json.loads((bundle_copy / "bundle.json").read_text())
    (bundle_copy / "bundle.json").write_text(json.dumps({**manifest, "shortlist": entry}))
    return bundle_copy


def test_vmap_engine_decodes_with_the_map_of_the_shipped_bundle(tmp_path, shortlisted, ct2_model, parts, shortlist):
    from edge_translator.bench import bench

    bundle, tok, vocab = parts
    source = tok.encode("help the dog", bundle.targets[bundle.default_target].id)
    assert bench.vmap_source({"ours-int8": bundle.path}, "ours-int8", ct2_model) is None
    name, model_dir = bench.vmap_source({"ours-int8": bundle.path, "ours-int8r": shortlisted}, "ours-int8", ct2_model)
    assert name == "ours-int8r"  # the shipped bundle has no shortlist: the first that has one
    assert bench.vmap_source({"ours-q8": shortlisted, "ours-int8r": shortlisted}, "ours-int8r", ct2_model)[0] == \
        "ours-int8r"
    engine = bench.CT2Engine(model_dir, vocab, 1, 1, use_vmap=True)
    calls, translator = [], engine.translator

    class Spy:
        def translate_batch(self, *args, **kwargs):
            calls.append(kwargs)
            return translator.translate_batch(*args, **kwargs)

    engine.translator = Spy()
    assert engine.run([source], 4, 1) == 4 and calls[0]["use_vmap"] is True
    result, = translator.translate_batch([[engine.pieces[i] for i in source]], beam_size=1, max_decoding_length=2,
                                         use_vmap=True, return_logits_vocab=True)
    assert np.asarray(result.logits[0]).shape[1] == len(shortlist.allowed(source))  # its directory has the map


def test_bench_times_ct2_with_its_vmap_at_each_measures_best_setting(tmp_path, shortlisted, ct2_model, tiny_hf,
                                                                      tiny_int8):
    from edge_translator.bench import bench
    from edge_translator.bench.benchreport import render_markdown

    ct2 = tmp_path / "ct2"
    shutil.copytree(ct2_model, ct2)
    options = bench.BenchOptions(threads=1, rounds=1, new_tokens=8, batched_new_tokens=8, batched_sentences=8,
                                 batch_sizes=(1, 4), latency_runs=1, cold_runs=1, engines=("ours-int8", "ct2-int8"),
                                 shipped="ours-int8r", ct2_settings=((1, 1), (1, 2)))
    sentences = english_sentences(16, 5)
    result = bench.run_benchmark({"ours-int8": tiny_int8, "ours-int8r": shortlisted}, tiny_hf, ct2, sentences,
                                 options)
    sweep = result.ct2_sweep
    assert sweep["vmap"]["bundle"] == "ours-int8r"  # the shipped bundle's shortlist
    assert result.batch1_tok_s["ct2-int8-vmap"] > 0
    own = sweep["vmap"]["sweep"]  # swept at every setting, like ct2-int8, in the same rounds
    assert set(own["batch1"]) == {"1x1", "1x2"} and sweep["vmap"]["batch1"] == max(own["batch1"], key=own["batch1"].get)
    assert result.batch1_tok_s["ct2-int8-vmap"] == max(own["batch1"].values())
    assert set(result.batched_tok_s["ct2-int8-vmap"]) == {"1", "4"}
    for size, rates in own["batched"].items():
        assert set(rates) == {"1x1", "1x2"} and sweep["vmap"]["batched"][size] == max(rates, key=rates.get)
        assert result.batched_tok_s["ct2-int8-vmap"][size] == max(rates.values())
    assert set(own["batched"]) == {"1", "4"}
    assert (tmp_path / "ct2-vmap" / VMAP_FILE).is_file() and not (ct2 / VMAP_FILE).exists()
    report = render_markdown(result, "plot.png")
    assert f"| ct2-int8-vmap ({sweep['vmap']['batch1']}) |" in report and "| ct2-int8-vmap |" in report
    assert "vs CTranslate2 with its vmap: ours-int8 " in report
    # without a shortlist, no map and no row
    plain = bench.run_benchmark({"ours-int8": tiny_int8}, tiny_hf, ct2, sentences,
                                replace(options, shipped="ours-int8"))
    assert "vmap" not in plain.ct2_sweep and "ct2-int8-vmap" not in plain.batch1_tok_s
    assert "ct2-int8-vmap" not in plain.batched_tok_s
    assert "vmap" not in render_markdown(plain, "plot.png")


def test_report_gives_ratios_to_ct2_with_its_vmap():
    from edge_translator.bench.bench import BenchOptions
    from edge_translator.bench.benchreport import BenchResult, render_markdown

    result = BenchResult(options={**asdict(BenchOptions(batch_sizes=(1, 16))), "block_size": "64"},
                         batch1_tok_s={"ours-int8r": 300.0, "ct2-int8": 150.0, "ct2-int8-default": 90.0,
                                       "ct2-int8-vmap": 200.0},
                         batched_tok_s={"ours-int8r": {"1": 300.0, "16": 900.0}, "ct2-int8": {"1": 150.0, "16": 1000.0},
                                        "ct2-int8-vmap": {"1": 250.0, "16": 1200.0}},
                         ct2_sweep={"default": "1x0", "batch1": {"1x1": 150.0, "1x0": 90.0},
                                    "batched": {"1": {"1x1": 150.0}, "16": {"2x1": 1000.0}},
                                    "vmap": {"bundle": "ours-int8r", "batch1": "1x1",
                                             "batched": {"1": "1x1", "16": "2x1"}}})
    report = render_markdown(result, "plot.png")
    assert "| ct2-int8-vmap (1x1) | 200.0 |  | 1.33× |" in report  # no rounds kept: no range, the ratio
    assert "vs CTranslate2 with its vmap: ours-int8r 1.50×." in report
    assert "| 16 | 900.0 (0.90×) | 1000.0 | 1200.0 |" in report
    assert "vs CTranslate2 with its vmap, at batch size 1 / 16: ours-int8r 1.20× / 0.75×." in report
    assert "the shortlist of `ours-int8r`" in report
