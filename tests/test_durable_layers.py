"""A power cut at any fsync or rename of a real document job, corpus job, model install and
document upload leaves whole files or none, and what each says is done is on the disk
(tests/powercut.py: only what was fsynced survives)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .powercut import PowerCut, supported

pytestmark = pytest.mark.skipif(not supported(), reason="the power-cut double reads files back through /proc")


def _visible(tree: dict[str, bytes] | None) -> dict[str, bytes]:
    """The files of a tree that are not hidden (temporary files and the journal are)."""
    return {k: v for k, v in (tree or {}).items() if not any(part.startswith(".") for part in k.split("/"))}


def test_a_document_job_leaves_each_output_whole_or_absent(tmp_path, monkeypatch, tiny_int8):
    from edge_translator.core.translator import Translator
    from edge_translator.documents.job import DocumentJob
    from edge_translator.documents.journal import JobCache
    from edge_translator.documents.plan import JobOptions

    source = tmp_path / "in"
    (source / "sub").mkdir(parents=True)
    (source / "a.txt").write_text("I like tea.\n\nWhere is the station?\n", "utf-8")
    (source / "sub" / "b.md").write_text("# My family\n\nThe cat is sleeping.\n", "utf-8")
    cut = PowerCut(tmp_path, monkeypatch)
    seen: list[dict[str, bytes]] = []
    cut.watch(lambda disk: seen.append(_visible(disk.tree("out") if disk.tree("out") is not None else {})))
    cache = JobCache(None)
    with Translator.load(tiny_int8, threads=1, cache=cache) as translator:
        summary = DocumentJob(translator, cache, [source], JobOptions(output_dir=tmp_path / "out", recursive=True)).run()
    assert [f.status for f in summary.files] == ["done", "done"]
    final = _visible({str(p.relative_to(tmp_path / "out")): p.read_bytes()
                      for p in (tmp_path / "out").rglob("*") if p.is_file()})
    assert sorted(final) == ["a.zh-Hans.txt", "sub/b.zh-Hans.md"] and all(final.values())
    assert not cut.violations and len(seen) > 8
    for tree in seen:
        assert all(final[name] == data for name, data in tree.items()), f"a partial output: {tree}"
    assert _visible(cut.disk("fsynced").tree("out")) == final, "an output said done is not on the disk"


def test_a_corpus_job_commits_whole_blocks_and_its_state_never_claims_a_lost_output(tmp_path, monkeypatch,
                                                                                     tiny_int8):
    from edge_translator.core.translator import Translator
    from edge_translator.scaleout.corpus import CorpusJob, CorpusOptions, LocalRunner
    from edge_translator.scaleout.state import _digest

    rows = ["I like tea.", "Where is the station?", "The cat is sleeping.", "It is raining.", "Good morning.",
            "My father is busy.", "I have two brothers.", "The weather is nice today.", "Open the door.", "Thanks."]
    (tmp_path / "in.csv").write_text("text\n" + "".join(f'"{r}"\n' for r in rows), "utf-8")
    options = CorpusOptions(block_rows=4, blocks_in_flight=1)
    state = ".out.csv.edge-corpus"  # the state folder of a one-file job, beside its output
    blocks = f"{state}/{_digest('in.csv')}"
    cut = PowerCut(tmp_path, monkeypatch)
    outputs: list[bytes | None] = []
    sizes = {0: 4, 1: 4, 2: 2}

    def consistent(disk):
        saved = disk.read(f"{state}/state.json")
        if saved is not None:
            record = json.loads(saved)["files"].get("in.csv")  # never empty or partial: it parses
            if record and record["written"]:
                assert disk.read("out.csv") not in (None, b""), "the state says written, the output is lost"
        for name, data in _visible(disk.tree(blocks)).items():
            assert len(json.loads(data)) == sizes[int(name.split(".")[0])], f"block {name} is partial"
        outputs.append(disk.read("out.csv"))
    cut.watch(consistent)
    with Translator.load(tiny_int8, threads=1) as translator:
        job = CorpusJob(tmp_path / "in.csv", tmp_path / "out.csv", "m" * 16, "zh-Hans", options)
        assert job.state.folder == tmp_path / state
        summary = job.run(LocalRunner(translator, options))
    assert [f.status for f in summary.files] == ["done"] and summary.rows == 10
    final = (tmp_path / "out.csv").read_bytes()
    assert not cut.violations, cut.violations
    assert set(outputs) <= {None, final} and final.count(b"\n") == 11
    assert cut.disk("fsynced").read("out.csv") == final
    assert json.loads(cut.disk("fsynced").read(f"{state}/state.json"))["files"]["in.csv"]["written"]


def test_an_installed_model_is_the_old_one_or_the_whole_new_one(tmp_path, monkeypatch, tiny_int8, tiny_fp32):
    from edge_translator.core.bundle import load_bundle
    from edge_translator.store import install

    models = tmp_path / "models"
    install.add(str(tiny_fp32), install.AddOptions(name="m", folder=models))
    old = {str(p.relative_to(models / "m")): p.read_bytes() for p in (models / "m").rglob("*") if p.is_file()}
    cut = PowerCut(tmp_path, monkeypatch)
    seen: list[dict | None] = []
    cut.watch(lambda disk: seen.append(disk.tree("models/m")))
    install.add(str(tiny_int8), install.AddOptions(name="m", folder=models, force=True))
    new = {str(p.relative_to(models / "m")): p.read_bytes() for p in (models / "m").rglob("*") if p.is_file()}
    assert new != old and load_bundle(models / "m")
    assert not cut.violations and len(seen) > 5
    # None: the instant between moving the old model aside and renaming the new one in
    # (two renames; a rename over a non-empty folder is impossible).
    assert all(tree in (None, old, new) for tree in seen), "a partial model was visible"
    assert cut.disk("fsynced").tree("models/m") == new
    assert cut.disk("fsynced").read("models/.default") is None
    install.set_default("m", models)
    assert cut.disk("fsynced").read(f"models/{install.DEFAULT_FILE}") == b"m\n"


def test_an_uploaded_document_is_kept_whole_before_its_state_says_so(tmp_path, monkeypatch):
    from edge_translator.daemon.documents import DocumentStore

    store = DocumentStore(None, tmp_path / "files")
    monkeypatch.setattr(store, "_start", lambda: None)  # no worker: only the upload is watched
    data = "I like tea.\n\nWhere is the station?\n".encode() * 200
    cut = PowerCut(tmp_path, monkeypatch)

    def recoverable(disk):
        for folder in (disk.tree("files") or {}):
            if folder.endswith("/state.json"):
                state = json.loads(disk.read(f"files/{folder}"))
                assert disk.read(f"files/{state['id']}/input{state['suffix']}") == data, "state kept, upload lost"
    cut.watch(recoverable)
    doc = store.submit("owner", "notes.txt", data, "zh-Hans")
    assert not cut.violations, cut.violations
    saved = json.loads(cut.disk("fsynced").read(f"files/{doc.id}/state.json"))
    assert saved["status"] == "queued" and saved["suffix"] == ".txt" and cut.disk("fsynced").read(f"files/{doc.id}/{doc.input}") == data
    shutil.rmtree(tmp_path / "files")


def test_the_job_journal_makes_its_new_output_folder_durable(tmp_path, monkeypatch):
    from edge_translator.documents.journal import Journal

    cut = PowerCut(tmp_path, monkeypatch)
    journal = Journal(tmp_path / "a" / "b" / ".edge-translator-job.sqlite")
    journal.close()
    assert cut.disk("fsynced").tree("a/b") is not None
    assert Path(tmp_path / "a" / "b").is_dir()
