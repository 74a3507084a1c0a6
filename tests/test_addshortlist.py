"""A shortlist added to an existing bundle, offline: the same weights, the same output without
it, and the same runtime guarantees as an exported one."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.core.decode import Seq2Seq
from edge_translator.core.errors import BundleError, InputError
from edge_translator.toolchain.addshortlist import add_shortlist
from tests.conftest import FIXTURES, run_cli
from tests.test_shortlist_runtime import CORPUS, random_sources, synthetic


@pytest.fixture(scope="module")
def int8r_plain(tmp_path_factory):
    from edge_translator.toolchain.export import ExportOptions, export

    out = tmp_path_factory.mktemp("plain") / "int8r"
    export(FIXTURES / "tiny-marian", out, ExportOptions())
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "pairs.tsv"
    path.write_text(CORPUS, encoding="utf-8")
    return path


@pytest.mark.parametrize("scheme", ["int8r", "int8", "fp32"])
def test_the_split_bundle_decodes_as_the_original_without_its_shortlist(scheme, int8r_plain, corpus, tmp_path):
    source = {"int8r": int8r_plain, "int8": FIXTURES / "tiny-int8", "fp32": FIXTURES / "tiny-fp32"}[scheme]
    out = add_shortlist(source, tmp_path / "sl", corpus)
    before, after = Seq2Seq.load(load_bundle(source), threads=1), Seq2Seq.load(load_bundle(out), threads=1)
    assert after.split and after.shortlist is not None and not before.split
    sources = random_sources(before.bundle, 12, 4)
    assert [h.ids for h in before.greedy_all(sources, 12)] == \
        [h.ids for h in after.greedy_all(sources, 12, shortlist=False)]
    ids, mask = before.pad(sources)
    cross_k, cross_v = before.encode(ids, mask)
    start = np.full((len(sources), 1), before.bundle.decoder_start_id, np.int64)
    empty = before.empty_cache(len(sources))
    logits = before.step(start, mask, empty, empty, cross_k, cross_v)[0]
    np.testing.assert_array_equal(after.step(start, mask, empty, empty, cross_k, cross_v)[0], logits)
    # the shortlist graph of the added bundle gives the whole layer's columns, bit for bit where exact
    after.shortlist = synthetic(after.bundle, 3)
    columns = after.output_columns(sources)
    part = after.step(start, mask, empty, empty, cross_k, cross_v, columns)[0]
    if scheme == "fp32":
        np.testing.assert_allclose(part, logits[..., columns.ids], rtol=0, atol=1e-5)
    else:
        np.testing.assert_array_equal(part, logits[..., columns.ids])
    manifest = json.loads((out / "bundle.json").read_text())
    assert manifest["validation"]["shortlist_agreement"]["sentences"] == 12
    assert manifest["shortlist"]["built_from"].endswith("5 pairs")


def test_in_place_by_default_and_again_on_a_split_bundle(int8r_plain, corpus, tmp_path):
    bundle = tmp_path / "b"
    shutil.copytree(int8r_plain, bundle)
    result = run_cli("shortlist", str(bundle), "--corpus", str(corpus), "--top-k", "3")
    assert result.returncode == 0, result.stderr
    assert "shortlist vs whole vocabulary greedy" in result.stdout.decode()
    first = json.loads((bundle / "bundle.json").read_text())
    assert first["shortlist"]["top_k"] == 3 and "projection" in first["graphs"]
    weights = (bundle / "weights.bin").read_bytes()
    result = run_cli("shortlist", str(bundle), "--corpus", str(corpus), "--top-k", "7")
    assert result.returncode == 0, result.stderr
    again = json.loads((bundle / "bundle.json").read_text())
    assert again["shortlist"]["top_k"] == 7 and (bundle / "weights.bin").read_bytes() == weights
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_refusals_leave_the_bundle_as_it_was(tmp_path, corpus):
    bundle = tmp_path / "q4"
    from edge_translator.toolchain.export import ExportOptions, export
    from edge_translator.toolchain.quantize import QuantizeOptions

    export(FIXTURES / "tiny-marian", bundle, ExportOptions(quantize=QuantizeOptions(mode="q4"), validate=False))
    before = {p.name: p.read_bytes() for p in bundle.iterdir()}
    with pytest.raises(BundleError, match="not one a shortlist can gather from"):
        add_shortlist(bundle, None, corpus)
    assert {p.name: p.read_bytes() for p in bundle.iterdir()} == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    with pytest.raises(InputError, match="exists"):
        add_shortlist(FIXTURES / "tiny-int8", bundle, corpus)
    result = run_cli("shortlist", str(FIXTURES / "tiny-int8"), "--out", str(tmp_path / "x"), "--corpus",
                     str(tmp_path / "missing.tsv"))
    stderr = result.stderr.decode()
    assert result.returncode != 0 and "does not exist" in stderr and len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_shortlist_curve_measures_and_refuses_bad_input_in_one_line(int8r_plain, corpus, tmp_path):
    english = tmp_path / "english.txt"
    english.write_text("Hello world.\nWhere is the station?\nI like tea.\n", encoding="utf-8")
    out = tmp_path / "curve.json"
    result = run_cli("shortlist-curve", str(int8r_plain), "--english", str(english), "--test", str(corpus),
                     "--top-k", "0,5", "--frequent", "3", "--json", str(out))
    assert result.returncode == 0, result.stderr
    curve = json.loads(out.read_text())
    assert [(p["top_k"], p["frequent"]) for p in curve["points"]] == [(0, 3), (5, 3)]
    assert all(0 <= p["pairs"]["sentence_coverage"] <= 1 for p in curve["points"])
    assert "| 5 | 3 |" in result.stdout.decode()
    for args, message in ((["--test", str(corpus), "--top-k", "x"], "--top-k takes comma-separated"),
                          (["--test", str(tmp_path / "missing.txt")], "does not exist"),
                          (["--test", str(tmp_path)], "cannot read"),
                          (["--test", str(corpus), "--decode"], "has no shortlist")):
        result = run_cli("shortlist-curve", str(int8r_plain), *args)
        stderr = result.stderr.decode()
        assert result.returncode != 0 and message in stderr and len(stderr.strip().splitlines()) == 1, (args, stderr)
