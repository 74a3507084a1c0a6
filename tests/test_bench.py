"""The benchmark harness runs end to end (on the tiny fixtures); it asserts no speed."""

import json
import re

import pytest

from edge_translator.core.engine import EngineOptions

from .conftest import run_cli

pytest.importorskip("ctranslate2")


SERVE_RUN = {  # an earlier `bench-serve` row, which a bench run must keep
    "command": "edge-translator bench-serve", "machine": {"cpu": "Test CPU"}, "model": "demo", "quantization": "rowwise",
    "options": {"sentences_per_request": 1, "threads": 2},
    "sequential": {"req_s": 10.0, "errors": {}, "seconds": 30.0, "clients": 1},
    "concurrent": {"req_s": 30.0, "clients": 16, "p50_ms": 90.0, "p99_ms": 200.0, "errors": {}, "seconds": 60.0},
    "ratio": 3.0, "rss_idle_mb": 90.0, "rss_start_mb": 100.0, "rss_end_mb": 101.0, "rss_growth": 0.01, "exit_code": 0,
}
DOCS_RUN = {  # an earlier `bench-docs` section, which a bench run must keep too
    "command": "edge-translator bench-docs", "machine": {"cpu": "Test CPU", "cpus": 2},
    "small_vs_large": {"sentences": 30, "files": 3, "rounds": 1, "one_rate": 10.0, "many_rate": 9.0,
                       "one_runs": [10.0], "many_runs": [9.0], "ratio": 0.9},
    "folder": {"files": 4, "megabytes": 0.1, "seconds": 1.0, "peak_rss_mb": 99.9, "sentences": 40, "decoded": 40,
               "reused": 0, "done": 4, "failed": 0},
    "placeholders": "placeholder figures kept",
}


def test_bench_smoke_writes_report(tmp_path):
    out = tmp_path / "docs"
    out.mkdir()
    (out / "benchmarks.json").write_text(json.dumps({"serve": {"demo": SERVE_RUN}, "documents": DOCS_RUN}))
    (out / "benchmarks.md").write_text("# Benchmarks\n\n## Batch 1\n\nold figures\n\n## History\n\nEarlier runs.\n"
                                       "\n## Other measurements\n\n- segmentation\n")
    result = run_cli("bench", "--smoke", "--work", str(tmp_path / "work"), "--out", str(out))
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads((out / "benchmarks.json").read_text())
    ours = {"ours-int8r", "ours-int8r-sl", "ours-q8", "ours-q4", "ours-int8"}
    ct2 = {"ct2-int8", "ct2-int8-default", "ct2-int8-vmap"}
    assert set(data["batch1_tok_s"]) == ours | {"ours-fp32", "torch"} | ct2
    assert all(v > 0 for v in data["batch1_tok_s"].values())
    workers = {"ours-int8r@2x1", "ours-int8r-sl@2x1"}  # the engine with two workers of one thread, batched only
    assert set(data["batched_tok_s"]) == ours | ct2 | workers
    # each figure keeps its rounds' range, the folded CTranslate2 names with their setting's
    assert set(data["batch1_spread"]) == set(data["batch1_tok_s"])
    for name, (low, median, high) in data["batch1_spread"].items():
        assert low <= median <= high and abs(median - data["batch1_tok_s"][name]) <= 0.1, name
    assert {name: set(by_size) for name, by_size in data["batched_spread"].items()} == \
        {name: set(curve) for name, curve in data["batched_tok_s"].items()}
    # CTranslate2 ran at every setting in every measure, and ct2-int8 is the best of them
    sweep = data["ct2_sweep"]
    settings = {"1x1", "1x2", "2x1", "1x0"}
    assert sweep["default"] == "1x0" and set(sweep["batch1"]) == settings
    assert data["batch1_tok_s"]["ct2-int8"] == max(sweep["batch1"].values())
    assert data["batch1_tok_s"]["ct2-int8-default"] == sweep["batch1"]["1x0"]
    assert set(sweep["batched"]) == {"1", "8"}
    for size, rates in sweep["batched"].items():
        assert set(rates) == settings and data["batched_tok_s"]["ct2-int8"][size] == max(rates.values())
    assert set(data["peak_rss_mb"]) == ours and min(data["peak_rss_mb"].values()) > 10
    assert data["cold_start_s"]["median"] > 0 and data["latency_ms"]["bundle"] == "ours-int8r"
    assert set(data["sizes_mb"]) == ours | {"ours-fp32", "ct2-int8"} and data["options"]["block_size"] == "64"
    steps = {k: v["bytes_per_step_mb"] for k, v in data["bandwidth"]["per_bundle"].items()}
    assert set(steps) == ours | {"ours-fp32"} and all(v > 0 for k, v in steps.items() if k != "ours-int8r-sl")
    ceilings = {k: v["ceiling_tok_s"] for k, v in data["bandwidth"]["per_bundle"].items()}
    # finite for both; which is higher depends on the model: on the tiny one the list spans
    # almost its whole vocabulary, so the split output layer can read more a step, not less
    assert all(0 < ceilings[k] < float("inf") for k in ("ours-int8r", "ours-int8r-sl"))
    assert (out / "benchmarks-throughput.png").read_bytes()[:4] == b"\x89PNG"
    report = (out / "benchmarks.md").read_text()
    assert "SMOKE RUN" in report and "| ct2-int8 |" in report and "| ours-q4 |" in report
    assert "### CTranslate2 at each setting" in report and "| 1x0 (default) |" in report
    assert re.search(r"\| ct2-int8 \(\dx\d\) \|", report) and "| ct2-int8-default (1x0) |" in report
    assert "| batched, batch size 8 |" in report
    # sections this report does not write are kept, after its own; the ones it writes are replaced
    assert report.endswith("## History\n\nEarlier runs.\n\n## Other measurements\n\n- segmentation\n")
    assert "old figures" not in report and report.count("## Batch 1") == 1
    assert data["serve"] == {"demo": SERVE_RUN} and "## Daemon under load" in report and "| demo (rowwise) |" in report
    assert "| not sampled |" in report  # a row measured before the halves were sampled still renders
    assert data["documents"] == DOCS_RUN and "## Documents" in report and "placeholder figures kept" in report
    _check_load(data["load"], soak=True)
    assert "## Engine under load" in report and "| 16 |" in report and "max_bulk_batches=2" in report
    # a report that fails to render leaves the files as they were (the kept sections' figures included)
    from dataclasses import fields

    from edge_translator.bench.benchreport import BenchResult, write_report

    broken = BenchResult(**{f.name: data[f.name] for f in fields(BenchResult)})
    broken.load = {**data["load"], "scheduler": {}}
    before = {name: (out / name).read_bytes() for name in ("benchmarks.json", "benchmarks.md")}
    with pytest.raises(KeyError):
        write_report(broken, out)
    assert {name: (out / name).read_bytes() for name in before} == before


def _check_load(load, soak):
    """The load section's structure: counts, positive figures, ratios (no speed is asserted)."""
    conc = load["concurrency"]
    assert set(conc["callers"]) == {"1", "4", "16"}
    expected = conc["paragraphs"] * conc["sentences_per_paragraph"]
    for row in [conc["sequential"], *conc["callers"].values()]:
        assert row["sentences"] == expected and row["tokens"] > 0
        assert row["tok_s"] > 0 and row["sent_s"] > 0 and 0 < row["p50_ms"] <= row["p95_ms"]
        assert row["calls"] == conc["paragraphs"] * load["options"]["rounds"]
    assert all(row["ratio"] > 0 for row in conc["callers"].values())
    first = load["first_sentence"]
    assert 0 < first["sentences"] <= 50 and 0 < first["first_completed_s"] <= first["first_s"] <= first["all_s"]
    inter = load["interactive"]
    assert inter["loaded"]["p50_ms"] > 0 and inter["unloaded"]["p50_ms"] > 0 and inter["ratio_p50"] > 0
    assert 0 < inter["bulk_sentences"] <= load["options"]["bulk_sentences"]
    bulk, interactive = load["scheduler"]["bulk"], load["scheduler"]["interactive"]
    for key in ("max_bulk_batches_1", "max_bulk_batches_2", "continuous", "no_tail_bound"):
        assert bulk[key]["tok_s"] > 0 and 0 < bulk[key]["sentences"] <= load["options"]["scheduler_sentences"]
    assert bulk["ratio_2_vs_1"] > 0 and bulk["ratio_bound_vs_2"] > 0 and bulk["ratio_continuous_vs_2"] > 0
    assert bulk["continuous"]["sentences"] == bulk["max_bulk_batches_2"]["sentences"]
    assert load["scheduler"]["continuous_default"] is EngineOptions().continuous
    assert set(interactive["callers"]) == {"4", "16"}
    for pair in interactive["callers"].values():
        assert pair["ratio_4_vs_1"] > 0 and pair["ratio_continuous"] > 0
        assert (pair["max_interactive_batches_1"]["sentences"] == pair["max_interactive_batches_4"]["sentences"]
                == pair["continuous"]["sentences"] > 0)
    assert interactive["first_sentence_4"]["first_s"] > 0 and interactive["first_sentence_1"] == first  # the default
    if not soak:
        assert load["soak"] == {}
        return
    rss = load["soak"]
    assert rss["seconds"] >= load["options"]["soak_seconds"] and len(rss["samples"]) >= 3
    assert 10 < rss["loaded_mb"] and 10 < rss["start_mb"] <= rss["peak_mb"] and rss["end_mb"] <= rss["peak_mb"]
    assert rss["slope_mb_per_min"] is not None and rss["interactive_sentences"] > 0
    # the bulk job decodes while the callers pause between calls (and at least every
    # EngineOptions.bulk_step_interval_ms besides): a soak whose bulk job finished nothing
    # measured the callers alone
    assert rss["bulk_sentences"] > 0
    assert rss["memory"] == "steady" and max(rss["peak_per_min"]) == rss["peak_mb"]  # what long-running front ends use


def test_bench_load_updates_only_its_section(tmp_path):
    out = tmp_path / "docs"
    out.mkdir()
    (out / "benchmarks.md").write_text("# Benchmarks\n\nKept.\n\n## Engine under load\n\nold\n\n"
                                       "## Later\n\nAlso kept.\n")
    (out / "benchmarks.json").write_text('{"batch1_tok_s": {"ours-int8": 1.0}, "load": {"old": true}}')
    result = run_cli("bench-load", "--smoke", "--soak-minutes", "0", "--out", str(out))
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads((out / "benchmarks.json").read_text())
    assert data["batch1_tok_s"] == {"ours-int8": 1.0} and "old" not in data["load"]
    _check_load(data["load"], soak=False)
    report = (out / "benchmarks.md").read_text()
    assert report.startswith("# Benchmarks\n\nKept.\n\n## Engine under load\n")
    assert report.count("## Engine under load") == 1 and "\nold\n" not in report
    assert report.endswith("\n## Later\n\nAlso kept.\n") and "--soak-minutes 0" in report
    # a load section measured before continuous batching was (which `bench --no-load` keeps) still renders
    from edge_translator.bench.report import render_load_section

    older = json.loads(json.dumps(data["load"]))
    for key in ("continuous", "ratio_continuous_vs_2"):
        del older["scheduler"]["bulk"][key]
    for pair in older["scheduler"]["interactive"]["callers"].values():
        del pair["continuous"], pair["ratio_continuous"]
    text = "\n".join(render_load_section(older))
    assert "`max_bulk_batches=2`" in text and "| 1, rows join |" not in text and "`continuous=True` |" not in text


def test_bench_soak_smoke_writes_its_section(tmp_path):
    """The soak's harness end to end, for seconds (it asserts no speed): mixed text and documents, no errors."""
    out = tmp_path / "docs"
    out.mkdir()
    (out / "benchmarks.md").write_text("# Benchmarks\n\n## Batch 1\n\nkept\n")
    (out / "benchmarks.json").write_text('{"serve": {"kept": true}}')
    result = run_cli("bench-soak", "--smoke", "--out", str(out))
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads((out / "benchmarks.json").read_text())
    run = data["soak"]
    assert data["serve"] == {"kept": True}
    assert run["errors_5xx"] == 0 and run["errors_4xx"] == 0 and run["exit_code"] == 0, run
    soak, docs = run["soak"], run["soak"]["documents"]
    assert soak["statuses"]["202"] == soak["statuses"]["204"] >= 1  # each upload deleted
    assert docs["done"] > 0 and docs["failed"] == docs["bad_results"] == 0 and docs["sentences"] > 0
    assert docs["docx"] > 0  # the first document is a .docx, waited for: it came back and opened
    assert soak["single"]["requests"] > 0 and soak["multi"]["requests"] > 0
    assert run["unloaded"]["multi"]["requests"] == 0
    assert run["ratio_p50"] > 0 and run["during_document_ratio_p50"] > 0
    assert run["unloaded_p50_ms"] == min(run["unloaded"]["single"]["p50_ms"], run["unloaded_again"]["single"]["p50_ms"])
    phases = ("unloaded", "soak", "during_document", "unloaded_again")
    assert all(0 <= run[phase]["others_cpu"] <= 1 for phase in phases)
    assert run["during_document"]["single_during_document"]["requests"] > 0
    rss = run["rss"]
    assert rss["rss_samples"] > 0 and len(rss["peak_per_minute_mb"]) == 1 and rss["peak_mb"] > 10
    assert rss["peak_mb"] == max(rss["peak_per_minute_mb"]) and rss["slope_mb_per_min"] is not None
    report = (out / "benchmarks.md").read_text()
    assert report.startswith("# Benchmarks\n\n## Batch 1\n\nkept\n\n## Mixed text and documents (serve)\n")
    assert "`edge-translator bench-soak --smoke --out " in report and "| one client beside a document job |" in report
    assert "| unloaded, again |" in report
    # the fit: a steady climb of 1 MB a second is 60 MB/min; per-minute peaks; early samples left out
    from edge_translator.bench.soakbench import rss_trend

    trend = rss_trend(sorted([(t, 100.0 + t) for t in range(0, 130)] + [(10.5, 500.0)]), fit_after_s=20)
    assert trend["slope_mb_per_min"] == 60.0 and trend["peak_per_minute_mb"] == [500.0, 219.0, 229.0]


def test_distinct_sentences_never_repeat():
    from edge_translator.bench.loadbench import distinct_sentences

    out = distinct_sentences(["One.", "Two."], 60)
    assert len(set(out)) == 60 and out[:2] == ["One.", "Two."] and out[2] == "Later, One."
    with pytest.raises(ValueError, match="at least one sentence"):
        distinct_sentences([], 3)


def test_load_options_reject_callers_without_work():
    from edge_translator.bench.loadbench import LoadOptions

    with pytest.raises(ValueError, match="paragraphs"):
        LoadOptions(paragraphs=8)
    with pytest.raises(ValueError, match="scheduler_callers"):
        LoadOptions(scheduler_callers=(2,))
    with pytest.raises(ValueError, match="rounds"):
        LoadOptions(rounds=0)


def test_prose_text_ships_in_a_package():
    from edge_translator.bench.prose import prose_sentences

    sentences = prose_sentences()
    assert len(sentences) >= 256 and any("Holmes" in s for s in sentences)


def test_segmentation_speed_is_measured():
    from edge_translator.bench.bench import segmentation_speed

    assert segmentation_speed("One sentence. Another one! A third?", rounds=3) > 0
    with pytest.raises(ValueError, match="rounds"):
        segmentation_speed("Text.", rounds=0)


def test_prepared_bundles_are_reused_only_if_this_exporter_wrote_their_graphs(tmp_path):
    """A bundle from an earlier exporter (another decoder) is exported again, not timed."""
    from edge_translator.bench.bench import _exported_by_this_version

    from .conftest import FIXTURES

    assert _exported_by_this_version(FIXTURES / "tiny-fp32")
    assert not _exported_by_this_version(FIXTURES / "tiny-int8r-127")  # MultiHeadAttention decoder
    assert not _exported_by_this_version(tmp_path / "missing")


def test_ct2_sweep_folds_into_best_and_default():
    """Every measure divides by CTranslate2's best setting; its default is kept beside it."""
    from edge_translator.bench.bench import pick_ct2_best

    rates = {"ours-int8r": 400.0, "ct2-int8@1x1": 75.0, "ct2-int8@1x2": 40.0, "ct2-int8@1x0": 54.0}
    folded, sweep = pick_ct2_best(rates)
    assert folded == {"ours-int8r": 400.0, "ct2-int8": 75.0, "ct2-int8-default": 54.0}
    assert sweep == {"1x1": 75.0, "1x2": 40.0, "1x0": 54.0}
    # without the default setting there is no default row; without CTranslate2, nothing changes
    assert pick_ct2_best({"ct2-int8@2x1": 9.0}) == ({"ct2-int8": 9.0}, {"2x1": 9.0})
    assert pick_ct2_best({"torch": 1.0}) == ({"torch": 1.0}, {})


def test_ct2_sweep_renders_best_in_bold():
    from edge_translator.bench.benchreport import render_ct2_sweep

    lines = render_ct2_sweep({"default": "1x0", "batch1": {"1x1": 75.0, "1x0": 54.0},
                              "batched": {"32": {"1x1": 500.0, "1x0": 610.0}}})
    assert "| measure | 1x1 | 1x0 (default) |" in lines
    assert "| batch 1 | **75.0** | 54.0 |" in lines and "| batched, batch size 32 | 500.0 | **610.0** |" in lines
    assert render_ct2_sweep({}) == []


def test_bench_request_breaks_one_request_down(tmp_path, tiny_fp32):
    """Every layer is measured and rendered; a lone client's requests never make the engine gather."""
    out = tmp_path / "docs"
    result = run_cli("bench-request", "--model", str(tiny_fp32), "--calls", "5", "--threads", "1", "--out", str(out))
    assert result.returncode == 0, result.stderr.decode()
    run = json.loads((out / "benchmarks.json").read_text())["request"]
    layers = {"http", "http_health", "app", "translate", "engine_queued", "engine_decoding", "ort_encoder",
              "ort_decoder", "ort_score", "segment", "tokens"}
    assert layers <= set(run["ms"]) and all(run["ms"][k] > 0 for k in layers - {"ort_score"})
    assert run["ms"]["decoder_calls"] >= 1 and run["output"] and run["gathered"] == 0
    report = (out / "benchmarks.md").read_text()
    assert "## One request, where the time goes" in report and "| decoding, as the engine times it |" in report
    bad = run_cli("bench-request", "--model", str(tiny_fp32), "--calls", "0", "--out", str(out))
    assert bad.returncode == 2 and b"--calls and --threads must be at least 1" in bad.stderr


def test_stutters_and_untranslated_output_are_told_apart():
    from edge_translator.bench.modelbench import stuttering, untranslated

    assert stuttering("我我我我") and stuttering("你好你好你好你好。") and stuttering("请再签签签字。")
    assert not stuttering("我们喜欢看书，看书很好。") and not stuttering("Hello hello hello hello")
    assert untranslated("Hello there.") and untranslated("") and not untranslated("Hello 你好")


def test_bench_models_compares_two_bundles_in_one_table(tiny_fp32, tiny_int8):
    from edge_translator.bench.prose import prose_sentences

    n = len(prose_sentences())
    result = run_cli("bench-models", str(tiny_fp32), str(tiny_int8), "--rounds", "1", "--sentences", "3")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    rows = [line for line in lines if line.startswith(f"| {tiny_fp32}") or line.startswith(f"| {tiny_int8}")]
    assert len(rows) == 2 and "CPU:" in lines[0]
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert float(cells[1]) > 0 and float(cells[2]) > 0 and float(cells[3]) > 0  # size, start-up, tok/s
        assert cells[5].endswith(f" of {n}") and cells[6].endswith(f" of {n}")  # over all the prose
    bad = run_cli("bench-models", str(tiny_fp32), str(tiny_fp32.parent / "no-such-bundle"))
    assert bad.returncode != 0 and len(bad.stderr.decode().strip().splitlines()) == 1
