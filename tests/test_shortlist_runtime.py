"""The vocabulary shortlist at run time: split graphs, per-row candidates, batch invariance.

The tiny random model's own shortlist is degenerate (its translations use a handful of
ids), so most tests swap in synthetic candidate lists drawn at random, many per source
piece and different for every sentence: the class of cases where batch-mates' unions differ.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.core.decode import Seq2Seq
from edge_translator.core.errors import BundleError, ExportError
from edge_translator.core.shortlist import Shortlist
from edge_translator.core.tokenizer import Tokenizer
from edge_translator.toolchain.export import ExportOptions, export
from edge_translator.toolchain.quantize import QuantizeOptions
from tests.conftest import FIXTURES, run_cli

CORPUS = "\n".join([
    "Hello world.\t你好，世界。",
    "Where is the train station?\t火车站在哪里？",
    "The meeting starts at 9:30.\t会议九点半开始。",
    "I like green tea.\t我喜欢绿茶。",
    "Please send the report by Friday.\t请在星期五之前发送报告。",
]) + "\n"


def _export(tmp_path_factory, mode: str):
    out = tmp_path_factory.mktemp(f"shortlist-{mode}") / "bundle"
    corpus = out.parent / "pairs.tsv"
    corpus.write_text(CORPUS, encoding="utf-8")
    export(FIXTURES / "tiny-marian", out, ExportOptions(quantize=QuantizeOptions(mode=mode), shortlist=True,
                                                        shortlist_corpus=str(corpus)))
    return out


@pytest.fixture(scope="module")
def int8r_bundle(tmp_path_factory):
    return _export(tmp_path_factory, "rowwise")


@pytest.fixture(scope="module")
def fp32_bundle(tmp_path_factory):
    return _export(tmp_path_factory, "none")


def _open(path, threads=1):
    bundle = load_bundle(path)
    tokenizer = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                               bundle.pad_id)
    return Seq2Seq.load(bundle, threads=threads), tokenizer


def synthetic(bundle, seed: int = 0, always: int = 24, per_piece: int = 12, full: bool = False) -> Shortlist:
    """Random candidate lists over the bundle's vocabulary (never the pad id)."""
    rng = np.random.default_rng(seed)
    v = bundle.vocab_size
    ids = np.setdiff1d(np.arange(v), [bundle.pad_id])
    if full:
        return Shortlist(ids.astype(np.int32), np.zeros(v + 1, np.int32), np.zeros(0, np.int32))
    base = np.union1d(rng.choice(ids, always, replace=False), [bundle.eos_id, bundle.unk_id])
    rest = np.setdiff1d(ids, base)
    lists = [np.sort(rng.choice(rest, rng.integers(0, per_piece + 1), replace=False)) for _ in range(v)]
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in lists])])
    return Shortlist(base.astype(np.int32), offsets.astype(np.int32), np.concatenate(lists).astype(np.int32))


def random_sources(bundle, count: int, seed: int = 1) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    target = bundle.targets[bundle.default_target].id
    pieces = np.setdiff1d(np.arange(4, bundle.vocab_size), [bundle.pad_id])
    return [[target, *map(int, rng.choice(pieces, rng.integers(2, 14))), bundle.eos_id] for _ in range(count)]


def test_export_splits_the_decoder_and_checksums_every_file(int8r_bundle):
    manifest = json.loads((int8r_bundle / "bundle.json").read_text())
    assert manifest["graphs"]["decoder"]["outputs"][0] == "hidden"
    assert set(manifest["graphs"]) == {"encoder", "decoder", "projection", "shortlist"}
    for name in ("shortlist.bin", "projection.onnx", "shortlist.onnx"):
        assert name in manifest["files"]
    assert manifest["output_layer"]["kind"] == "rowwise"
    agreement = manifest["validation"]["shortlist_agreement"]
    assert agreement["batch_differ"] == 0 and agreement["sentences"] > 0
    assert manifest["shortlist"]["built_from"].endswith("5 pairs")


@pytest.mark.parametrize("kind", ["int8r", "fp32"])
def test_a_column_does_not_depend_on_the_others(kind, int8r_bundle, fp32_bundle):
    """The shortlist graph's columns equal the whole output layer's, whichever others are computed."""
    model, _ = _open(int8r_bundle if kind == "int8r" else fp32_bundle)
    rng = np.random.default_rng(3)
    hidden = rng.standard_normal((5, 1, model.heads * model.head_dim)).astype(np.float32)
    full = model.project(hidden)[:, 0]
    for seed in range(6):
        model.shortlist = synthetic(model.bundle, seed)
        columns = model.output_columns(random_sources(model.bundle, 1 + seed, seed))
        part = model.project(hidden, columns)[:, 0]
        assert part.shape == (5, columns.width)
        if kind == "int8r":  # an exact integer product scaled per column: the same bits
            np.testing.assert_array_equal(part, full[:, columns.ids])
        else:
            np.testing.assert_allclose(part, full[:, columns.ids], rtol=0, atol=1e-5)


def test_each_row_keeps_to_its_own_candidates_and_equals_the_masked_full_layer(int8r_bundle):
    """Greedy output under the shortlist is the full layer's argmax over the row's own candidates."""
    model, _ = _open(int8r_bundle)
    model.shortlist = synthetic(model.bundle, 7)
    sources = random_sources(model.bundle, 12, 7)
    shortlisted = model.greedy_all(sources, 10)
    original = model.next_tokens
    for source, hyp in zip(sources, shortlisted):
        allowed = model.output_columns([source]).ids
        assert set(hyp.ids) <= set(allowed.tolist())

        def masked(logits, allow_eos=True, outputs=None, allowed=allowed):
            keep = np.zeros(logits.shape[-1], bool)
            keep[allowed] = True
            logits[:, ~keep] = -np.inf
            return original(logits, allow_eos, outputs)

        model.next_tokens = masked
        try:
            reference = model.greedy_all([source], 10, shortlist=False)[0]
        finally:
            model.next_tokens = original
        assert hyp.ids == reference.ids and hyp.stop == reference.stop


@pytest.mark.parametrize("use_cache", [True, False])
def test_a_sentence_does_not_depend_on_its_batch_mates(int8r_bundle, use_cache):
    model, _ = _open(int8r_bundle)
    model.shortlist = synthetic(model.bundle, 11)
    sources = random_sources(model.bundle, 16, 11)
    batched = model.greedy_all(sources, 12, use_cache=use_cache)
    alone = [model.greedy_all([s], 12)[0] for s in sources]
    assert [h.ids for h in batched] == [h.ids for h in alone]
    widths = {model.output_columns([s]).width for s in sources}
    assert len(widths) > 1 and model.output_columns(sources).width > max(widths)  # the unions differ


def test_rows_that_join_a_decoding_batch_widen_it_without_moving_the_others(int8r_bundle):
    from edge_translator.core.greedybatch import GreedyBatch

    model, _ = _open(int8r_bundle)
    model.shortlist = synthetic(model.bundle, 5, per_piece=20)
    sources = random_sources(model.bundle, 6, 5)
    batch = GreedyBatch(model, sources[:2], [12, 12], min_new_tokens=6)  # still decoding when the others join
    results = dict(batch.step())
    results.update(batch.step())
    width = batch.columns.width
    joined = batch.admit(sources[2:], [12] * 4)
    assert batch.columns.width > width
    while not batch.done:
        results.update(batch.step())
    alone = [model.greedy_all([s], 12, min_new_tokens=6)[0].ids for s in sources]
    assert [results[r].ids for r in [0, 1, *joined]] == alone


def test_a_shortlist_of_every_id_equals_the_whole_vocabulary(int8r_bundle):
    model, _ = _open(int8r_bundle)
    model.shortlist = synthetic(model.bundle, full=True)
    sources = random_sources(model.bundle, 10, 2)
    assert [h.ids for h in model.greedy_all(sources, 12)] == \
        [h.ids for h in model.greedy_all(sources, 12, shortlist=False)]
    beams = [h.ids for _, h in sorted(model.beam(sources, [12] * len(sources), 3))]
    assert beams == [h.ids for _, h in sorted(model.beam(sources, [12] * len(sources), 3, shortlist=False))]


def test_beam_search_keeps_to_the_candidates(int8r_bundle):
    model, _ = _open(int8r_bundle)
    model.shortlist = synthetic(model.bundle, 9)
    sources = random_sources(model.bundle, 6, 9)
    for row, hyp in model.beam(sources, [10] * len(sources), 4):
        assert set(hyp.ids) <= set(model.output_columns([sources[row]]).ids.tolist())


def test_translator_option_and_cli_flag_turn_it_off(int8r_bundle, tmp_path):
    from edge_translator.core.translator import TranslateOptions, Translator

    translator = Translator.load(int8r_bundle)
    translator.model.shortlist = synthetic(translator.bundle, 4)
    text = "Where is the train station? The meeting starts at 9:30."
    on = list(translator.translate_iter(text))
    off = list(translator.translate_iter(text, TranslateOptions(shortlist=False)))
    full = Translator.load(int8r_bundle, cache=None)
    full.model.shortlist = None
    assert [s.ids for s in off] == [s.ids for s in full.translate_iter(text)]
    target = translator.bundle.targets["zh-Hans"].id
    for sentence in on:
        allowed = translator.model.output_columns([translator.tokenizer.encode(sentence.source, target)]).ids
        assert set(sentence.ids) <= set(allowed.tolist())
    assert on != off  # the random lists do restrict these sentences
    translator.close()
    full.close()
    result = run_cli("translate", "--model", str(int8r_bundle), "--no-shortlist", "Hello world.")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip()


def test_bad_split_bundles_get_one_line(int8r_bundle, tmp_path):
    broken = tmp_path / "b"
    shutil.copytree(int8r_bundle, broken)
    manifest = json.loads((broken / "bundle.json").read_text())
    del manifest["graphs"]["shortlist"]
    (broken / "bundle.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="both the 'projection' and the 'shortlist'"):
        load_bundle(broken)
    manifest = json.loads((int8r_bundle / "bundle.json").read_text())
    manifest["output_layer"]["weight"]["offset"] = 10 ** 9
    (broken / "bundle.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="points past the file"):
        Seq2Seq.load(load_bundle(broken), threads=1)
    manifest = json.loads((int8r_bundle / "bundle.json").read_text())
    manifest["shortlist"]["candidates"] += 1
    (broken / "bundle.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="shortlist says"):
        Seq2Seq.load(load_bundle(broken), threads=1)


def test_schemes_without_a_gatherable_output_layer_are_refused(tmp_path):
    with pytest.raises(ExportError, match="not q4"):
        export(FIXTURES / "tiny-marian", tmp_path / "q4", ExportOptions(quantize=QuantizeOptions(mode="q4"),
                                                                        shortlist=True, validate=False))
    assert not (tmp_path / "q4").exists()
    result = run_cli("export", str(FIXTURES / "tiny-marian"), str(tmp_path / "x"), "--shortlist-top-k", "5")
    stderr = result.stderr.decode()
    assert result.returncode != 0 and "only go with --shortlist" in stderr
    assert len(stderr.strip().splitlines()) == 1
