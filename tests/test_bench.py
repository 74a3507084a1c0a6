"""The benchmark harness runs end to end (on the tiny fixtures); it asserts no speed."""

import json

import pytest

from .conftest import run_cli

pytest.importorskip("ctranslate2")


def test_bench_smoke_writes_report(tmp_path):
    out = tmp_path / "docs"
    result = run_cli("bench", "--smoke", "--work", str(tmp_path / "work"), "--out", str(out))
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads((out / "benchmarks.json").read_text())
    assert set(data["batch1_tok_s"]) == {"ours-int8", "ours-fp32", "torch", "ct2-int8"}
    assert all(v > 0 for v in data["batch1_tok_s"].values())
    assert set(data["batched_tok_s"]) == {"ours-int8", "ct2-int8"}
    assert data["peak_rss_mb"]["ours-int8"] > 10 and data["cold_start_s"]["median"] > 0
    assert (out / "benchmarks-throughput.png").read_bytes()[:4] == b"\x89PNG"
    report = (out / "benchmarks.md").read_text()
    assert "SMOKE RUN" in report and "| ct2-int8 |" in report


def test_prose_text_ships_in_a_package():
    from edge_translator.toolchain.bench import prose_sentences

    sentences = prose_sentences()
    assert len(sentences) >= 256 and any("Holmes" in s for s in sentences)


def test_segmentation_speed_is_measured():
    from edge_translator.toolchain.bench import segmentation_speed

    assert segmentation_speed("One sentence. Another one! A third?", rounds=3) > 0
    with pytest.raises(ValueError, match="rounds"):
        segmentation_speed("Text.", rounds=0)
