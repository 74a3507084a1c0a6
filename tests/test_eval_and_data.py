"""The eval command and the demo model's data split (no training here)."""

import json

import pytest

from edge_translator.toolchain.train import normalize_key, read_pairs, split_pairs

from .conftest import run_cli

pytest.importorskip("sacrebleu")


def test_eval_prints_bleu_and_chrf(tmp_path, tiny_int8):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("20\t你好。\t1\tHello.\n40\t车站在哪里？\t2\tWhere is the station?\n", encoding="utf-8")
    result = run_cli("eval", str(tiny_int8), "--pairs", str(pairs), "--json")
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads(result.stdout)
    assert data["sentences"] == 2 and 0 <= data["bleu"] <= 100 and "tok:zh" in data["signature"]
    two = tmp_path / "two.tsv"
    two.write_text("Hello.\t你好。\n", encoding="utf-8")
    assert run_cli("eval", str(tiny_int8), "--pairs", str(two)).stdout.startswith(b"BLEU ")


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
