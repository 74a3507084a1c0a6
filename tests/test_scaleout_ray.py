"""Corpus and document jobs on a real Ray cluster of two one-CPU nodes (``ray.cluster_utils``).

The cluster's outputs must equal a local run's row for row (the default scheme is
batch-invariant); a node killed mid-job must leave every row written exactly once; a
corrupt file fails alone; the shared translation memory is read by the actors and fed after.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray  # the extra 'ray' is in the dev extra: CI installs it

from .conftest import run_cli
from .test_corpus import SENTENCES, read, texts, write


@pytest.fixture(scope="module")
def cluster():
    """A head without CPUs (the driver's) and two worker nodes of one CPU each."""
    from ray.cluster_utils import Cluster

    made = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(2):
        made.add_node(num_cpus=1)
    made.wait_for_nodes()
    ray.init(address=made.address, log_to_driver=False)
    yield made
    ray.shutdown()
    made.shutdown()


@pytest.fixture(scope="module")
def model():
    from edge_translator.core.bundle import load_bundle
    from edge_translator.core.translator import model_identity, resolve_model

    bundle = load_bundle(resolve_model(None))
    return model_identity(bundle), bundle.default_target


def job(source: Path, out: Path, model, memory=None, block_rows: int = 50):
    from edge_translator.scaleout.corpus import CorpusJob, CorpusOptions

    return CorpusJob(source, out, model[0], model[1], CorpusOptions(block_rows=block_rows), memory=memory)


def local_run(source: Path, out: Path, model, block_rows: int = 50):
    from edge_translator.core.translator import Translator
    from edge_translator.scaleout.corpus import LocalRunner

    made = job(source, out, model, block_rows=block_rows)
    with Translator.load(threads=1) as translator:
        return made.run(LocalRunner(translator, made.options))


def ray_runner(model, **kwargs):
    from edge_translator.core.translator import TranslateOptions
    from edge_translator.scaleout.rayrun import RayRunner

    return RayRunner(None, None, TranslateOptions(), model[0], **kwargs)


def corpus_folder(folder: Path) -> None:
    folder.mkdir()
    for i, kind in enumerate(("csv", "jsonl", "parquet")):
        write(folder / f"part{i}.{kind}", texts(230, seed=i))


def test_the_cluster_writes_what_a_local_run_writes_row_for_row(tmp_path, cluster, model):
    corpus_folder(tmp_path / "in")
    local = local_run(tmp_path / "in", tmp_path / "local", model)
    remote = job(tmp_path / "in", tmp_path / "ray", model).run(ray_runner(model))
    assert [f.status for f in remote.files] == ["done"] * 3 and remote.rows == local.rows == 690
    for name in ("part0.csv", "part1.jsonl", "part2.parquet"):
        assert read(tmp_path / "ray" / name) == read(tmp_path / "local" / name), name
    # both actors took part
    assert remote.decoded > 0


class KillAfter:
    """Progress that removes a worker node once ``blocks`` blocks are committed."""

    def __init__(self, cluster, blocks: int):
        self.cluster, self.blocks, self.seen, self.killed = cluster, blocks, 0, False

    def start(self, files, sentences):
        pass

    def advance(self, rows, plan=None):
        self.seen += 1
        if self.seen == self.blocks and not self.killed:
            self.cluster.remove_node(self.cluster.list_all_nodes()[-1], allow_graceful=False)
            self.killed = True

    def finished(self, plan):
        pass

    def message(self, text):
        pass


def test_a_node_killed_mid_job_leaves_every_row_written_exactly_once(tmp_path, cluster, model):
    source = tmp_path / "big.jsonl"
    with open(source, "w", encoding="utf-8") as handle:
        for i in range(3000):
            handle.write(json.dumps({"n": i, "text": SENTENCES[i % len(SENTENCES)]}) + "\n")
    local_run(source, tmp_path / "local.jsonl", model)
    progress = KillAfter(cluster, blocks=5)
    try:
        summary = job(source, tmp_path / "ray.jsonl", model).run(ray_runner(model), progress)
    finally:
        if progress.killed:
            cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
    assert progress.killed, "the job ended before the node was killed"
    assert [f.status for f in summary.files] == ["done"]
    numbers = [json.loads(line)["n"] for line in (tmp_path / "ray.jsonl").read_text("utf-8").splitlines()]
    assert numbers == list(range(3000)), "a row is missing or written twice"
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()


def test_a_corrupt_file_fails_alone_with_its_name(tmp_path, cluster, model):
    folder = tmp_path / "in"
    folder.mkdir()
    write(folder / "good.jsonl", texts(60))
    (folder / "bad.jsonl").write_bytes(b'{"text": "Fine."}\n{"text": "torn\n')
    (folder / "torn.parquet").write_bytes(b"PAR1 not really")
    summary = job(folder, tmp_path / "out", model).run(ray_runner(model, wave_rows=50))  # two waves
    status = {f.input.name: (f.status, f.message) for f in summary.files}
    assert status["good.jsonl"][0] == "done"
    assert status["bad.jsonl"][0] == "failed" and "line 2" in status["bad.jsonl"][1]
    assert status["torn.parquet"][0] == "failed" and "Parquet" in status["torn.parquet"][1]
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")) == ["good.jsonl"]
    local_run(folder / "good.jsonl", tmp_path / "local.jsonl", model)
    assert (tmp_path / "out" / "good.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()


def test_actors_read_the_memory_and_its_new_pairs_are_merged_after(tmp_path, cluster, model):
    from edge_translator.core.memory import TranslationMemory

    source = tmp_path / "a.jsonl"
    write(source, [f"{s}" for s in SENTENCES[:120]])
    with TranslationMemory(tmp_path / "tm.sqlite") as memory:
        memory.add(SENTENCES[0], "人工的译文。", model[1])  # a person's translation wins over the model's
        snapshot_path = tmp_path / "snap.sqlite"
        assert memory.copy_to(snapshot_path, model[0], model[1]) == 1
        summary = job(source, tmp_path / "out", model, memory=memory).run(
            ray_runner(model, snapshot=snapshot_path.read_bytes()))
        assert summary.reused >= 1 and summary.decoded > 100
        # two actors may both decode a sentence that two blocks hold; the memory keeps it once
        assert 100 < memory.stats().entries <= 1 + summary.decoded
    rows = read(tmp_path / "out" / "a.jsonl")
    assert rows[0]["translation"] == "人工的译文。"
    # a second job through the merged memory decodes nothing
    with TranslationMemory(tmp_path / "tm.sqlite") as memory:
        memory.copy_to(tmp_path / "snap2.sqlite", model[0], model[1])
        again = job(source, tmp_path / "again", model).run(
            ray_runner(model, snapshot=(tmp_path / "snap2.sqlite").read_bytes()))
    assert again.decoded == 0 and read(tmp_path / "again" / "a.jsonl") == rows


def test_an_actor_with_another_model_stops_the_job_in_one_line(tmp_path, cluster, model):
    from edge_translator.core.errors import EdgeTranslatorError

    source = tmp_path / "a.jsonl"
    write(source, texts(10))
    with pytest.raises(EdgeTranslatorError, match="install the same model on every node"):
        job(source, tmp_path / "out", ("0" * 16, model[1])).run(ray_runner(("0" * 16, model[1]), attempts=1))
    assert not (tmp_path / "out" / "a.jsonl").exists()


def test_the_command_runs_corpus_and_docs_on_the_cluster_as_it_runs_them_here(tmp_path, cluster):
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    corpus_folder(tmp_path / "in")
    local = run_cli("corpus", str(tmp_path / "in"), str(tmp_path / "local"), "--no-tm", "--json", env=env)
    remote = run_cli("corpus", str(tmp_path / "in"), str(tmp_path / "ray"), "--no-tm", "--json",
                     "--ray", cluster.address, env=env)
    assert remote.returncode == local.returncode == 0, remote.stderr.decode()
    for name in ("part0.csv", "part1.jsonl", "part2.parquet"):
        assert read(tmp_path / "ray" / name) == read(tmp_path / "local" / name)

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("I like tea.\n\nWhere is the station?\n", "utf-8")
    (docs / "b.md").write_text("# My family\n\nI have two brothers and a [sister](https://example.com/s).\n", "utf-8")
    (docs / "sub").mkdir()
    (docs / "sub" / "c.srt").write_text("1\n00:00:01,000 --> 00:00:02,500\nGood morning.\n", "utf-8")
    (docs / "bad.docx").write_bytes(b"not a zip")
    here = run_cli("docs", str(docs), "-r", "-o", str(tmp_path / "d-local"), "--no-tm", "--json", env=env)
    there = run_cli("docs", str(docs), "-r", "-o", str(tmp_path / "d-ray"), "--no-tm", "--json",
                    "--ray", cluster.address, env=env)
    assert here.returncode == there.returncode == 7, there.stderr.decode()
    a, b = json.loads(here.stdout), json.loads(there.stdout)
    for key in ("done", "failed", "skipped", "sentences"):
        assert a[key] == b[key], key
    assert [(f["status"], f["message"].replace("d-local", "d-ray")) for f in a["files"]] == \
        [(f["status"], f["message"]) for f in b["files"]]
    for path in (tmp_path / "d-local").rglob("*"):
        if path.is_file() and not path.name.startswith("."):
            assert (tmp_path / "d-ray" / path.relative_to(tmp_path / "d-local")).read_bytes() == path.read_bytes()
    rerun = run_cli("docs", str(docs), "-r", "-o", str(tmp_path / "d-ray"), "--no-tm", "--json", env=env)
    assert json.loads(rerun.stdout)["up_to_date"] == 3, "a local rerun must find the cluster's outputs up to date"


def test_docs_on_the_cluster_fill_the_memory_as_a_local_run_does(tmp_path, cluster):
    """The sentences the actors decode reach the driver's memory, an empty one included (it
    sends no snapshot): a second job, even a local one, decodes nothing."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(4):
        (docs / f"part{i}.txt").write_text("\n\n".join(SENTENCES[30 * i:30 * i + 30]) + "\n", "utf-8")
    tm = str(tmp_path / "tm.sqlite")
    first = run_cli("docs", str(docs), "-o", str(tmp_path / "one"), "--tm", tm, "--json", "--ray", cluster.address)
    assert first.returncode == 0, first.stderr.decode()
    assert json.loads(first.stdout)["decoded"] > 100
    again = run_cli("docs", str(docs), "-o", str(tmp_path / "two"), "--tm", tm, "--json", "--ray", cluster.address)
    local = run_cli("docs", str(docs), "-o", str(tmp_path / "three"), "--tm", tm, "--json")
    for run in (again, local):
        summary = json.loads(run.stdout)
        assert summary["decoded"] == 0 and summary["done"] == 4, summary
    for name in ("part0.zh-Hans.txt", "part3.zh-Hans.txt"):
        assert (tmp_path / "two" / name).read_bytes() == (tmp_path / "one" / name).read_bytes() \
            == (tmp_path / "three" / name).read_bytes()
