"""``edge-translator corpus`` on this machine: formats, row order, resume after kill -9, bad files.

Everything but the parity check runs the real command in a subprocess with the embedded
demo model, as a user would; the translation memory lives in a temporary data directory.
"""

from __future__ import annotations

import csv
import json
import math
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from .conftest import ROOT, run_cli
from .waiting import wait_until

SENTENCES = [line.rstrip("\n").split("\t")[3]
             for line in (ROOT / "assets" / "eval" / "tatoeba-cmn-eng-test.tsv").read_text("utf-8").splitlines()]
KINDS = ("csv", "tsv", "jsonl", "parquet")


@pytest.fixture
def env(tmp_path) -> dict:
    """A private data directory, so the translation memory is the test's own."""
    return {"XDG_DATA_HOME": str(tmp_path / "data")}


def corpus(*args: str, env: dict):
    return run_cli("corpus", *args, env=env)


def texts(count: int, seed: int = 7) -> list[str | None]:
    """Rows of every class a corpus holds: sentences, several sentences, a line break inside,
    blank and missing cells, punctuation alone, surrounding spaces, repeats."""
    rng = random.Random(seed)
    rows: list[str | None] = []
    for i in range(count):
        kind = i % 11
        if kind == 3:
            rows.append(None)
        elif kind == 5:
            rows.append("   ")
        elif kind == 7:
            rows.append(f"{rng.choice(SENTENCES)} {rng.choice(SENTENCES)}")
        elif kind == 8:
            rows.append(f"{rng.choice(SENTENCES)}\n{rng.choice(SENTENCES)}")
        elif kind == 9:
            rows.append(rng.choice(["—", "…", "***"]))
        elif kind == 10:
            rows.append(f"  {rng.choice(SENTENCES)}  ")
        else:
            rows.append(rng.choice(SENTENCES) if kind else SENTENCES[i % 40])
    return rows


def write(path: Path, rows: list[str | None]) -> None:
    """``rows`` as the column ``text`` of a file of ``path``'s kind, beside an id and a number."""
    kind = path.suffix[1:]
    if kind in ("csv", "tsv"):
        with open(path, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, dialect="excel-tab" if kind == "tsv" else "excel")
            writer.writerow(["id", "text", "price"])
            for i, text in enumerate(rows):
                writer.writerow([f"A-{i}", text or "", f"{i}.50"])
    elif kind == "jsonl":
        with open(path, "w", encoding="utf-8") as handle:
            for i, text in enumerate(rows):
                handle.write(json.dumps({"id": f"A-{i}", "text": text, "price": i + 0.5}, ensure_ascii=False) + "\n")
    else:
        pq.write_table(pa.table({"id": [f"A-{i}" for i in range(len(rows))], "text": rows,
                                 "price": [i + 0.5 for i in range(len(rows))]}), path, row_group_size=37)


def read(path: Path) -> list[dict]:
    """Every row of an output, as a dict of its columns."""
    kind = path.suffix[1:]
    if kind in ("csv", "tsv"):
        with open(path, encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle, dialect="excel-tab" if kind == "tsv" else "excel"))
    if kind == "jsonl":
        return [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    return pq.read_table(path).to_pylist()


def _blank(value) -> bool:
    return value is None or value == ""


@pytest.mark.parametrize("kind", KINDS)
def test_every_row_comes_back_in_order_with_its_translation_score_and_model(tmp_path, env, kind):
    from edge_translator.core.translator import Translator

    rows = texts(150)
    source = tmp_path / f"shop.{kind}"
    write(source, rows)
    result = corpus(str(source), str(tmp_path / "out"), "--no-tm", "--block-rows", "16", "--json", env=env)
    assert result.returncode == 0, result.stderr.decode()
    summary = json.loads(result.stdout)
    assert summary["rows"] == 150 and [f["status"] for f in summary["files"]] == ["done"]
    out = read(tmp_path / "out" / source.name)
    assert len(out) == len(rows)
    with Translator.load(threads=2) as translator:
        model = translator.model_id
        for i, (row, text) in enumerate(zip(out, rows)):
            assert row["id"] == f"A-{i}", f"row {i} moved"
            assert str(row["price"]) in (f"{i}.50", f"{i}.5")
            if text is None or not text.strip():
                assert _blank(row["translation"]) and _blank(row["translation_score"]), f"row {i}: {row}"
                assert _blank(row["translation_model"])
                continue
            if not any(ch.isalnum() for ch in text):
                assert row["translation"] == text and _blank(row["translation_score"])
                continue
            # one row at a time, outside any block: the block's batches change nothing
            assert row["translation"] == translator.translate(text.strip()), f"row {i}: {text!r}"
            score = float(row["translation_score"])
            assert math.isfinite(score) and score < 0, f"row {i}: score {score}"
            assert row["translation_model"] == model


def state_blocks(state: Path) -> int:
    return sum(1 for _ in state.glob("*/*.json")) if state.is_dir() else 0


def test_killed_three_times_the_job_finishes_and_writes_every_row_once(tmp_path, env):
    rows = [f"{SENTENCES[i % len(SENTENCES)]}" for i in range(6000)]
    source = tmp_path / "big.jsonl"
    with open(source, "w", encoding="utf-8") as handle:
        for i, text in enumerate(rows):
            handle.write(json.dumps({"n": i, "text": text}) + "\n")
    clean = corpus(str(source), str(tmp_path / "clean.jsonl"), "--no-tm", "--block-rows", "100", "--quiet", env=env)
    assert clean.returncode == 0, clean.stderr.decode()
    expected = (tmp_path / "clean.jsonl").read_bytes()

    out = tmp_path / "out.jsonl"
    state = tmp_path / ".out.jsonl.edge-corpus"
    full_env = dict(os.environ, **env)
    full_env.pop("EDGE_TRANSLATOR_MODEL", None)
    kills = 0
    for _ in range(3):
        process = subprocess.Popen([sys.executable, "-m", "edge_translator.cli", "corpus", str(source), str(out),
                                    "--no-tm", "--block-rows", "100", "--quiet"], cwd=ROOT, env=full_env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        target = state_blocks(state) + random.Random(kills).randint(3, 8)
        wait_until(lambda: process.poll() is not None or state_blocks(state) >= target, timeout=300,
                   what=f"{target} committed blocks")
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        process.wait(timeout=60)
        process.stderr.close()
        assert not out.exists(), "an output was written before its last block"
    assert kills >= 2, f"only {kills} of 3 runs were killed before they finished"
    committed = state_blocks(state)
    final = corpus(str(source), str(out), "--no-tm", "--block-rows", "100", "--json", env=env)
    assert final.returncode == 0, final.stderr.decode()
    assert json.loads(final.stdout)["rows"] == 6000 - 100 * committed, "committed blocks were translated again"
    assert out.read_bytes() == expected
    numbers = [json.loads(line)["n"] for line in out.read_text("utf-8").splitlines()]
    assert numbers == list(range(6000)), "a row is missing, moved or written twice"
    assert not list(tmp_path.glob(".*.edge-tmp")) and state_blocks(state) == 0


def test_rerun_is_up_to_date_a_changed_input_is_redone_and_outputs_need_force(tmp_path, env):
    source = tmp_path / "a.csv"
    write(source, texts(30))
    out = tmp_path / "o"
    assert corpus(str(source), str(out), "--no-tm", env=env).returncode == 0
    again = corpus(str(source), str(out), "--no-tm", "--json", env=env)
    assert json.loads(again.stdout)["files"][0]["status"] == "up to date"
    write(source, texts(31, seed=3))
    redone = corpus(str(source), str(out), "--no-tm", "--json", env=env)
    assert json.loads(redone.stdout)["files"][0]["status"] == "done" and len(read(out / "a.csv")) == 31
    other = corpus(str(source), str(out), "--no-tm", "--json", "--as", "zh", env=env)
    assert json.loads(other.stdout)["files"][0]["status"] == "done", "other settings must redo the file"
    assert "zh_score" in read(out / "a.csv")[0]
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "a.csv").write_text("keep me\n", "utf-8")
    skipped = corpus(str(source), str(tmp_path / "theirs"), "--no-tm", env=env)
    assert skipped.returncode == 0 and "pass --force" in skipped.stdout.decode()
    assert (tmp_path / "theirs" / "a.csv").read_text("utf-8") == "keep me\n"
    forced = corpus(str(source), str(tmp_path / "theirs"), "--no-tm", "--force", env=env)
    assert forced.returncode == 0 and len(read(tmp_path / "theirs" / "a.csv")) == 31


BAD = {
    "quote.csv": (b'id,text\n1,"never closed\n', "line 2"),
    "latin1.csv": ("id,text\n1,caf\xe9 au lait\n".encode("latin-1"), "not valid UTF-8"),
    "broken.jsonl": (b'{"text": "Fine."}\n{"text": "no end\n', "line 2: is not JSON"),
    "array.jsonl": (b'{"text": "Fine."}\n["text"]\n', "line 2: holds a JSON list"),
    "number.jsonl": (b'{"text": "Fine."}\n{"text": 12}\n', "holds a int, not text"),
    "nocolumn.csv": (b"id,body\n1,Hello.\n", "has no column 'text'"),
    "clash.jsonl": (b'{"text": "Hi.", "translation": "x"}\n', "already has a key 'translation'"),
    "empty.tsv": (b"", "is empty"),
    "torn.parquet": (None, "not a readable Parquet file"),
}


def test_bad_files_fail_alone_with_their_name_and_what_is_wrong(tmp_path, env):
    folder = tmp_path / "in"
    folder.mkdir()
    write(folder / "good.jsonl", texts(20))
    for name, (data, _) in BAD.items():
        if data is None:
            write(folder / name, texts(20))
            data = (folder / name).read_bytes()[:-40]
        (folder / name).write_bytes(data)
    result = corpus(str(folder), str(tmp_path / "out"), "--no-tm", env=env)
    assert result.returncode == 7, result.stderr.decode()
    text = result.stdout.decode() + result.stderr.decode()
    assert "Traceback" not in text
    for name, (_, reason) in BAD.items():
        line = next((ln for ln in text.splitlines() if f"in/{name}: failed" in ln), None)
        assert line is not None and reason in line, f"{name}: {line!r}"
        assert not (tmp_path / "out" / name).exists(), f"{name}: an output was written"
    assert len(read(tmp_path / "out" / "good.jsonl")) == 20


def test_the_memory_serves_a_second_job_and_bad_arguments_are_one_line(tmp_path, env):
    source = tmp_path / "a.jsonl"
    write(source, texts(40))
    first = corpus(str(source), str(tmp_path / "one"), "--json", env=env)
    assert first.returncode == 0 and json.loads(first.stdout)["decoded"] > 0
    second = corpus(str(source), str(tmp_path / "two"), "--json", env=env)
    assert json.loads(second.stdout)["decoded"] == 0 and json.loads(second.stdout)["reused"] > 0
    assert (tmp_path / "one" / "a.jsonl").read_bytes() == (tmp_path / "two" / "a.jsonl").read_bytes()
    for args, code, words in [
        (("--block-rows", "0"), 2, "block_rows must be at least 1"),
        (("--target", "xx"), 2, "--target xx is not offered"),
        (("--column", "body"), 7, "has no column 'body'"),
    ]:
        bad = corpus(str(source), str(tmp_path / "bad"), "--no-tm", *args, env=env)
        message = bad.stderr.decode() + bad.stdout.decode()
        assert bad.returncode == code and words in message and "Traceback" not in message, (args, message)
    missing = corpus(str(tmp_path / "nothing.csv"), str(tmp_path / "x"), env=env)
    assert missing.returncode == 4 and missing.stderr.decode().count("\n") == 1
    mismatch = corpus(str(source), str(tmp_path / "x.csv"), env=env)
    assert mismatch.returncode == 4 and "keeps the input's format" in mismatch.stderr.decode()


def test_without_ray_the_cluster_options_say_how_to_install_it(tmp_path, env, monkeypatch, capsys):
    from edge_translator.cli import main

    source = tmp_path / "a.jsonl"
    write(source, texts(5))
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
    monkeypatch.setenv("XDG_DATA_HOME", env["XDG_DATA_HOME"])
    assert main(["corpus", str(source), str(tmp_path / "o"), "--ray"]) == 6
    assert main(["docs", str(source), "-o", str(tmp_path / "d"), "--ray"]) == 6
    err = capsys.readouterr().err
    assert err.count("pip install 'edge-translator[ray]'") == 2 and "Traceback" not in err


def test_reading_streams_and_the_writer_refuses_a_short_result(tmp_path):
    from edge_translator.scaleout.corpusio import Columns, CorpusError, read_texts, write_with

    source = tmp_path / "a.csv"
    write(source, ["One.", None, "Two."])
    assert list(read_texts(source, Columns())) == ["One.", None, "Two."]
    assert list(read_texts(source, Columns("2"))) == ["One.", None, "Two."]
    with pytest.raises(CorpusError, match="more rows than when it was read"):
        write_with(source, tmp_path / "o.csv", Columns(), [("一。", -0.1)], "m")
    with pytest.raises(CorpusError, match="fewer rows"):
        write_with(source, tmp_path / "o.csv", Columns(), [("一", -0.1)] * 4, "m")


def test_lost_and_damaged_blocks_are_redone_and_a_damaged_state_is_one_line(tmp_path, env):
    from edge_translator.core.translator import Translator
    from edge_translator.scaleout.corpus import CorpusJob, CorpusOptions, LocalRunner

    source = tmp_path / "a.jsonl"
    write(source, texts(30))
    options = CorpusOptions(block_rows=10)

    class FirstBlockOnly(LocalRunner):  # a runner that loses all but the first block
        def run(self, blocks):
            return super().run(b for b in blocks if b.index == 0)

    with Translator.load(threads=2) as translator:
        clean = CorpusJob(source, tmp_path / "clean.jsonl", translator.model_id, "zh-Hans", options)
        clean.run(LocalRunner(translator, options))

        def run(runner_class):
            job = CorpusJob(source, tmp_path / "out.jsonl", translator.model_id, "zh-Hans", options)
            return job.run(runner_class(translator, options)).files[0]

        lost = run(FirstBlockOnly)
        assert lost.status == "failed" and "2 of its 3 blocks were not translated" in lost.message
        assert not (tmp_path / "out.jsonl").exists()
        (block,) = (tmp_path / ".out.jsonl.edge-corpus").glob("*/000000.json")
        block.write_bytes(b'[["torn')
        damaged = run(LocalRunner)
        assert damaged.status == "failed" and "damaged" in damaged.message and not (tmp_path / "out.jsonl").exists()
        assert run(LocalRunner).status == "done"
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "clean.jsonl").read_bytes()

    (tmp_path / ".out.jsonl.edge-corpus" / "state.json").write_text("{not json", "utf-8")
    broken = corpus(str(source), str(tmp_path / "out.jsonl"), "--no-tm", env=env)
    message = broken.stderr.decode()
    assert broken.returncode == 4 and "is damaged" in message and "remove the folder" in message
    assert message.count("\n") == 1 and "Traceback" not in message


def test_a_cluster_that_does_not_answer_is_one_line_at_once(tmp_path, env):
    import socket

    source = tmp_path / "a.jsonl"
    write(source, texts(5))
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{free.getsockname()[1]}"
    for args in (("corpus", str(source), str(tmp_path / "o")), ("docs", str(source), "-o", str(tmp_path / "d"))):
        result = run_cli(*args, "--no-tm", "--ray", address, env=env)
        message = result.stderr.decode()
        assert result.returncode == 2 and f"no Ray cluster answers at {address}" in message, message
        assert message.count("\n") == 1 and "Traceback" not in message
    assert not (tmp_path / "o").exists() and not (tmp_path / "d").exists()


def _distinct_blocks(count: int, size: int) -> list[list[str]]:
    """``count`` blocks of ``size`` test sentences, no sentence in two blocks."""
    seen, blocks = set(), [[] for _ in range(count)]
    sentences = iter(SENTENCES)
    for block in blocks:
        while len(block) < size:
            sentence = next(sentences)
            if " ".join(sentence.split()) not in seen:
                seen.add(" ".join(sentence.split()))
                block.append(sentence)
    return blocks


def _reread(blocks, pairs):
    """Each block again through a translator whose only cache holds ``pairs``: ``(rows, decoded)``."""
    from edge_translator.core.cache import LRUCache
    from edge_translator.core.translator import Translator
    from edge_translator.scaleout.blocks import BlockTranslator

    memory = LRUCache(100_000)
    for key, value in pairs:
        memory.put(key, value)
    with Translator.load(threads=1, cache=memory) as translator:
        again = BlockTranslator(translator)
        results = [again.collect(again.submit(block)) for block in blocks]
    return [r[0] for r in results], sum(r[1].decoded for r in results)


def test_blocks_in_flight_together_each_send_back_the_pairs_they_decoded():
    """Two blocks on one translator at once, collected in the other order (a Ray actor takes
    two calls at once): each block's pairs are its own sentences, and together they answer
    both blocks again without decoding."""
    from edge_translator.core.translator import Translator
    from edge_translator.scaleout.blocks import BlockTranslator

    a, b = _distinct_blocks(2, 40)
    with Translator.load(threads=1) as translator:
        blocks = BlockTranslator(translator)
        pending_a, pending_b = blocks.submit(a), blocks.submit(b)
        rows_b, counts_b, pairs_b = blocks.collect(pending_b)
        rows_a, counts_a, pairs_a = blocks.collect(pending_a)
    assert len(pairs_a) == counts_a.decoded >= 40 and len(pairs_b) == counts_b.decoded >= 40
    text_a, text_b = " ".join(" ".join(t.split()) for t in a), " ".join(" ".join(t.split()) for t in b)
    assert all(key.sentence in text_a and key.sentence not in text_b for key, _ in pairs_a)
    assert all(key.sentence in text_b and key.sentence not in text_a for key, _ in pairs_b)
    rows, decoded = _reread([a, b], pairs_a + pairs_b)
    assert decoded == 0 and rows == [rows_a, rows_b]


def test_an_actor_taking_two_blocks_at_once_loses_no_pair():
    """The cluster's actor, called from two threads at once as Ray calls it: one long block,
    and short ones, each started after the long one stored another sentence. What the calls
    send back fills a memory that answers every block again (a call that started used to
    drop what the other had stored)."""
    import pickle
    import threading

    from edge_translator.core.bundle import load_bundle
    from edge_translator.core.translator import TranslateOptions, model_identity, resolve_model
    from edge_translator.scaleout.rayrun import _BlockActor

    sentences = _distinct_blocks(1, 140)[0]
    blocks = [sentences[:120]] + [[s] for s in sentences[120:]]
    long_ones = {" ".join(s.split()) for s in blocks[0]}
    actor = _BlockActor(None, 1, TranslateOptions(), model_identity(load_bundle(resolve_model(None))), None)
    stored, long_done = threading.Event(), threading.Event()

    class Watched:
        """The translator's cache, saying when the long block stores a sentence."""

        def __init__(self, inner):
            self.inner = inner

        def get(self, key):
            return self.inner.get(key)

        def put(self, key, value):
            self.inner.put(key, value)
            if key.sentence in long_ones:
                stored.set()

    actor.translator.cache = Watched(actor.translator.cache)
    outputs: list = [None] * len(blocks)

    def call(j: int) -> None:
        outputs[j] = actor({"key": ["f"], "index": [j], "texts": [json.dumps(blocks[j])]})

    def short_ones() -> None:
        for j in range(1, len(blocks)):
            stored.wait()
            if not long_done.is_set():
                stored.clear()
            call(j)

    worker = threading.Thread(target=short_ones)
    worker.start()
    call(0)
    long_done.set()
    stored.set()
    worker.join()
    actor.translator.close()
    assert all(out["error"] == [""] for out in outputs)
    pairs = [pair for out in outputs for pair in pickle.loads(out["pairs"][0])]
    assert len(pairs) == sum(out["decoded"][0] for out in outputs) >= 140
    rows, decoded = _reread(blocks, pairs)
    assert decoded == 0
    assert rows == [[tuple(r) for r in json.loads(out["rows"][0])] for out in outputs]
