"""The shortlist's build side: Dice candidates, copy-through, the file, the export step, the CLI's refusals."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.core.errors import BundleError, InputError
from edge_translator.core.greedybatch import RepetitionGuard
from edge_translator.core.tokenizer import Tokenizer
from edge_translator.toolchain import shortlist as sl

from .conftest import ROOT, run_cli

EMBEDDED = ROOT / "models" / "tatoeba-en-zh-small"


def _tokenizer(bundle_dir: Path) -> Tokenizer:
    bundle = load_bundle(bundle_dir, verify=False)
    return Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                          bundle.pad_id)


@pytest.fixture(scope="module")
def tok(tiny_fp32) -> Tokenizer:
    return _tokenizer(tiny_fp32)


#: "help" always comes with 丈; 上 is in every sentence (the most frequent token). Plain p(t|s) ties
#: them; Dice does not.
TOY = [("help me", "丈上"), ("help the man", "丈上下"), ("help", "丈上上"), ("go home", "下上"),
       ("the dog", "上不"), ("water", "上三"), ("Paris", "上")]


def check_invariants(shortlist: sl.Shortlist, tok: Tokenizer) -> None:
    """The contract the runtime reads (see the module docstring)."""
    v = len(tok.vocab)
    always, offsets, candidates = shortlist.always, shortlist.offsets, shortlist.candidates
    assert always.dtype == offsets.dtype == candidates.dtype == np.int32
    bad = set(sl.excluded_ids(tok).tolist())
    assert tok.pad_id in bad and tok.vocab[">>cmn_Hans<<"] in bad
    assert {tok.eos_id, tok.unk_id} <= set(always.tolist())
    assert np.all(np.diff(always) > 0) and not bad & set(always.tolist())
    assert len(offsets) == v + 1 and offsets[0] == 0 and offsets[-1] == len(candidates)
    assert np.all(np.diff(offsets) >= 0)
    assert candidates.min(initial=0) >= 0 and candidates.max(initial=0) < v
    for s in range(v):
        row = shortlist.candidates_of(s)
        assert np.all(np.diff(row) > 0), s
    assert not bad & set(candidates.tolist())
    assert not np.isin(candidates, always).any()


def test_dice_prefers_the_associated_token_over_a_frequent_one(tok):
    shortlist = sl.build_shortlist(tok, sl.corpus_ids(tok, TOY), sl.ShortlistOptions(top_k=1, frequent=0, ascii=False))
    check_invariants(shortlist, tok)
    help_row = set(shortlist.candidates_of(tok.vocab["▁help"]).tolist())
    assert tok.vocab["丈"] in help_row and tok.vocab["上"] not in help_row
    assert shortlist.always.tolist() == sorted([tok.eos_id, tok.unk_id])
    # with frequent tokens on, 上 (in every sentence) is always allowed and never a candidate
    shortlist = sl.build_shortlist(tok, sl.corpus_ids(tok, TOY), sl.ShortlistOptions(top_k=50, frequent=1))
    assert tok.vocab["上"] in shortlist.always and tok.vocab["上"] not in shortlist.candidates
    assert {tok.vocab["丈"], tok.vocab["下"]} <= set(shortlist.candidates_of(tok.vocab["▁help"]).tolist())


def test_top_k_bounds_the_corpus_candidates(tok):
    pairs = sl.corpus_ids(tok, TOY)
    bare = sl.build_shortlist(tok, [], sl.ShortlistOptions(top_k=0, frequent=0))  # copy-through only
    for k in (0, 1, 2):
        shortlist = sl.build_shortlist(tok, pairs, sl.ShortlistOptions(top_k=k, frequent=0))
        for s in range(len(tok.vocab)):
            extra = set(shortlist.candidates_of(s).tolist()) - set(bare.candidates_of(s).tolist())
            assert len(extra) <= k
    assert np.array_equal(sl.build_shortlist(tok, pairs, sl.ShortlistOptions(top_k=0, frequent=0)).candidates,
                          bare.candidates)


def test_counts_once_per_sentence():
    pairs = [(np.array([5, 5, 6]), np.array([7, 7])), (np.array([5]), np.array([8, 7]))]
    counts = sl.count(pairs, 10)
    assert counts.pairs == 2 and counts.source[5] == 2 and counts.source[6] == 1 and counts.target[7] == 2
    assert counts.frequency[7] == 3
    assert dict(zip(counts.keys.tolist(), counts.together.tolist())) == {57: 2, 58: 1, 67: 1}


def test_copy_through_names_and_numbers(tok):
    shortlist = sl.build_shortlist(tok, [], sl.ShortlistOptions(top_k=50, frequent=0, ascii=False))
    check_invariants(shortlist, tok)
    row = lambda piece: {tok.pieces[i] for i in shortlist.candidates_of(tok.vocab[piece]).tolist()}  # noqa: E731
    # numbers, digit by digit, as a word start ('▁') or inside one (the tiny target model knows
    # no Latin letters: names and URLs are tested on the embedded model below)
    assert row("▁3,000") == {"▁", "3", ",", "0"} and row("9") == {"▁", "9"}
    assert row("e") == {"▁"}  # not a target piece: the target side would decode it as unknown
    # a source piece absent from the corpus gets copy-through only
    trained = sl.build_shortlist(tok, sl.corpus_ids(tok, TOY), sl.ShortlistOptions(top_k=50, frequent=0, ascii=False))
    london = tok.vocab["▁London"]
    assert np.array_equal(trained.candidates_of(london), shortlist.candidates_of(london))


def _spellable(text: str, pieces: set[str], tok: Tokenizer) -> bool:
    """Whether ``text`` is a concatenation of ``pieces``; a character the target model does not
    know is spelled ``<unk>`` (the model can say nothing else for it)."""
    unknown = {c for c in text if any(tok.target.is_unknown(i) for i in tok.target.encode(c))}
    reach = [True] + [False] * len(text)
    for end in range(1, len(text) + 1):
        reach[end] = any(reach[start] and (text[start:end] in pieces or (end - start == 1 and text[start] in unknown
                                                                          and "<unk>" in pieces))
                         for start in range(end))
    return reach[-1]


@pytest.mark.skipif(not EMBEDDED.is_dir(), reason="the embedded model is not in this checkout")
def test_copy_through_spells_urls_names_and_numbers():
    """On the embedded model's separate vocabularies: a sentence's own candidates spell its URL,
    name and number out of target pieces, in the middle of a Chinese sentence (no '▁')."""
    tok = _tokenizer(EMBEDDED)
    shortlist = sl.build_shortlist(tok, [], sl.ShortlistOptions(top_k=0, frequent=0, ascii=False))
    for text in ("help@example.com", "https://www.zürich-2024.org/a_b?id=42", "Kowalczyk", "3.14159", "1,299.99"):
        allowed = {tok.pieces[i] for i in shortlist.allowed(tok.encode(text)).tolist()}
        assert _spellable(text, allowed, tok), text
        assert _spellable("▁" + text, allowed, tok), text
        assert not _spellable(text, {tok.pieces[i] for i in shortlist.always.tolist()}, tok)


def test_file_round_trips(tmp_path, tok):
    options = sl.ShortlistOptions(top_k=3, frequent=2)
    shortlist = sl.build_shortlist(tok, sl.corpus_ids(tok, TOY), options)
    entry = sl.write_shortlist(tmp_path, shortlist, options, "toy: 7 pairs")
    a, v, c = len(shortlist.always), len(tok.vocab), len(shortlist.candidates)
    assert entry == {"file": "shortlist.bin", "always": a, "vocab": v, "candidates": c, "top_k": 3, "frequent": 2,
                     "copy_through": True, "built_from": "toy: 7 pairs"}
    raw = (tmp_path / "shortlist.bin").read_bytes()
    assert len(raw) == 4 * (a + v + 1 + c)
    assert np.array_equal(np.frombuffer(raw[:4 * a], "<i4"), shortlist.always)  # little-endian, no header
    back = sl.read_shortlist(tmp_path, entry)
    for name in ("always", "offsets", "candidates"):
        assert np.array_equal(getattr(back, name), getattr(shortlist, name))
    with pytest.raises(BundleError, match="holds"):
        sl.read_shortlist(tmp_path, dict(entry, candidates=c + 1))


def test_coverage():
    shortlist = sl.Shortlist(np.array([0, 1], np.int32), np.array([0, 0, 0, 2, 3], np.int32),
                             np.array([2, 3, 2], np.int32))
    report = sl.coverage(shortlist, [([2], [2, 3, 0]), ([3], [2, 3]), ([0, 1], [1])])
    assert report["sentences"] == 3 and report["tokens"] == 6
    assert report["token_coverage"] == pytest.approx(5 / 6) and report["sentence_coverage"] == pytest.approx(2 / 3)
    assert report["mean_candidates"] == pytest.approx((4 + 3 + 2) / 3) and report["max_candidates"] == 4


def test_own_translations(fp32_parts):
    bundle, tok, model = fp32_parts
    target = bundle.targets[bundle.default_target].id
    sentences = ["Hello world.", "Tom went to Paris in 2024.", "x " * 200]  # the last is too long for the model
    pairs = sl.translation_ids(model, tok, target, sentences, batch_size=2)
    assert len(pairs) == 2
    src, out = pairs[1]
    assert src.tolist() == tok.encode(sentences[1])[:-1]  # no target token, no </s>
    alone = model.greedy_all([tok.encode(sentences[1], target)], 2 * (len(src) + 2) + 10, guard=RepetitionGuard())
    assert out.tolist() == list(alone[0].ids)
    shortlist = sl.build_shortlist(tok, pairs, sl.ShortlistOptions(top_k=5, frequent=3))
    check_invariants(shortlist, tok)
    assert sl.coverage(shortlist, pairs)["token_coverage"] == 1.0  # everything it said is allowed


def test_default_corpus_is_shipped_and_not_the_test_split():
    from edge_translator.toolchain.traindata import normalize_key

    sentences, name = sl.default_sentences()
    assert len(sentences) > 48_000 and "Tatoeba" in name
    size = sum((ROOT / "edge_translator" / "toolchain" / f).stat().st_size for f in sl.CORPUS_FILES)
    assert size <= 2_000_000  # package data of every install: 48k short sentences, not more
    test = ROOT / "assets" / "eval" / "tatoeba-cmn-eng-test.tsv"
    held = {normalize_key(line.split("\t")[3]) for line in test.read_text(encoding="utf-8-sig").splitlines() if line}
    assert not held & {normalize_key(s) for s in sentences}


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_hf):
    pytest.importorskip("torch")
    from edge_translator.cli import main

    work = tmp_path_factory.mktemp("shortlist")
    corpus = work / "pairs.tsv"
    corpus.write_text("".join(f"{en}\t{zh}\n" for en, zh in TOY), encoding="utf-8")
    out = work / "tiny"
    assert main(["export", str(tiny_hf), str(out), "--quantize", "none", "--shortlist", "--shortlist-corpus",
                 str(corpus), "--shortlist-top-k", "4", "--shortlist-frequent", "3"]) == 0
    return out, corpus


def test_export_writes_the_shortlist(exported, capsys):
    out, corpus = exported
    bundle = load_bundle(out)
    entry = bundle.manifest["shortlist"]
    assert entry["file"] == "shortlist.bin" and "shortlist.bin" in bundle.manifest["files"]
    assert entry["top_k"] == 4 and entry["frequent"] == 3 and entry["copy_through"] is True
    assert entry["built_from"] == f"{corpus}: {len(TOY)} pairs"
    assert entry["vocab"] == len(json.loads((out / "vocab.json").read_text(encoding="utf-8")))
    tok = _tokenizer(out)
    shortlist = sl.read_shortlist(out, entry)
    check_invariants(shortlist, tok)
    assert len(shortlist.always) == entry["always"] and len(shortlist.candidates) == entry["candidates"]
    expected = sl.build_shortlist(tok, sl.corpus_ids(tok, TOY), sl.ShortlistOptions(top_k=4, frequent=3))
    assert np.array_equal(shortlist.candidates, expected.candidates)


def test_corrupt_shortlist_fails_the_checksum(exported, tmp_path):
    out, _ = exported
    copy = tmp_path / "bundle"
    shutil.copytree(out, copy)
    data = bytearray((copy / "shortlist.bin").read_bytes())
    data[len(data) // 2] ^= 0x01
    (copy / "shortlist.bin").write_bytes(bytes(data))
    with pytest.raises(BundleError, match=r"shortlist\.bin does not match its sha256"):
        load_bundle(copy)


def _bad_corpora(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    (tmp_path / "empty.tsv").write_text("\n\n", encoding="utf-8")
    (tmp_path / "latin1.tsv").write_bytes("café\t咖啡\n".encode("utf-8") + "naïve\tx\n".encode("latin-1"))
    (tmp_path / "columns.tsv").write_text("one\ttwo\tthree\n", encoding="utf-8")
    return {"missing": (tmp_path / "nope.tsv", "does not exist"), "empty": (tmp_path / "empty.tsv", "has no pairs"),
            "not UTF-8": (tmp_path / "latin1.tsv", "is not UTF-8"),
            "columns": (tmp_path / "columns.tsv", r"columns.tsv:1: expected 2 columns"),
            "directory": (tmp_path, "cannot read")}


def test_bad_corpus_is_refused_in_one_line(tmp_path, tiny_hf, capsys):
    pytest.importorskip("torch")
    from edge_translator.cli import main

    for what, (path, message) in _bad_corpora(tmp_path).items():
        out = tmp_path / f"out-{what.replace(' ', '-')}"
        assert main(["export", str(tiny_hf), str(out), "--shortlist", "--shortlist-corpus", str(path)]) == \
            InputError.exit_code, what
        err = capsys.readouterr().err
        assert err.startswith("edge-translator: error: shortlist corpus: ") and err.count("\n") == 1, err
        assert re.search(message, err), (what, err)
        assert not out.exists() and not list(tmp_path.glob(f".{out.name}.*")), what  # no staging left behind
    with pytest.raises(InputError):
        sl.read_corpus(tmp_path / "nope.tsv")


def test_shortlist_flags_need_shortlist(tmp_path, tiny_hf, capsys):
    from edge_translator.cli import main

    assert main(["export", str(tiny_hf), str(tmp_path / "o"), "--shortlist-top-k", "5"]) == InputError.exit_code
    assert "--shortlist-top-k only go with --shortlist" in capsys.readouterr().err
    assert main(["export", str(tiny_hf), str(tmp_path / "o"), "--shortlist", "--shortlist-frequent", "-1"]) == \
        InputError.exit_code
    assert "--shortlist-frequent must be at least 0" in capsys.readouterr().err
    from edge_translator.toolchain.export import ExportOptions

    with pytest.raises(ValueError, match="shortlist is off"):
        ExportOptions(shortlist_corpus="pairs.tsv")
    with pytest.raises(ValueError, match="top-k"):
        ExportOptions(shortlist=True, shortlist_top_k=-1)


def test_cli_reports_a_missing_corpus_without_a_traceback(tmp_path, tiny_hf):
    result = run_cli("export", str(tiny_hf), str(tmp_path / "out"), "--shortlist", "--shortlist-corpus",
                     str(tmp_path / "missing.tsv"))
    err = result.stderr.decode()
    assert result.returncode == InputError.exit_code and "Traceback" not in err
    assert err.strip().splitlines() == [f"edge-translator: error: shortlist corpus: pairs file "
                                        f"{tmp_path / 'missing.tsv'} does not exist"]


def test_cli_help_names_the_defaults():
    """The CLI spells the defaults out (declaring it imports no toolchain module): keep them in step."""
    from edge_translator.cli import build_parser

    export = next(a for a in build_parser()._subparsers._group_actions[0].choices.items() if a[0] == "export")[1]
    text = " ".join(export.format_help().split())
    assert f"(default {sl.DEFAULT_TOP_K})" in text and f"(default {sl.DEFAULT_FREQUENT})" in text


def test_export_counts_the_models_own_translations_without_a_corpus(tmp_path, tiny_hf, monkeypatch):
    pytest.importorskip("torch")
    from edge_translator.toolchain.export import ExportOptions, export
    from edge_translator.toolchain.quantize import QuantizeOptions

    sentences = ["Tom lives in Paris.", "It costs 3,000 yuan.", "Where is the station?"]
    monkeypatch.setattr(sl, "default_sentences", lambda: (list(sentences), "three test sentences"))
    out = export(tiny_hf, tmp_path / "b", ExportOptions(quantize=QuantizeOptions(mode="none"), validate=False,
                                                         shortlist=True, shortlist_top_k=7, shortlist_frequent=5))
    bundle = load_bundle(out)
    entry = bundle.manifest["shortlist"]
    assert entry["built_from"] == "the model's own greedy translations of 3 English sentences from three test sentences"
    tok = _tokenizer(out)
    shortlist = sl.read_shortlist(out, entry)
    check_invariants(shortlist, tok)
    from edge_translator.core.decode import Seq2Seq

    pairs = sl.translation_ids(Seq2Seq.load(bundle, threads=1), tok, bundle.targets[bundle.default_target].id,
                               sentences)
    assert sl.coverage(shortlist, pairs)["sentence_coverage"] == 1.0


def test_corpus_characters_unknown_to_the_target_model_count_as_unk(tok):
    """'x' is a source piece of the joint vocabulary but not a target piece: the Chinese side's 'x'
    is <unk> to the model, never the source-only id."""
    assert "x" in tok.vocab and not any(tok.target.id_to_piece(i) == "x" for i in range(tok.target.get_piece_size()))
    (_, target), = sl.corpus_ids(tok, [("mail me", "丈x上")])
    assert target.tolist() == [tok.vocab["▁"], tok.vocab["丈"], tok.unk_id, tok.vocab["上"]]
