"""``edge-translator docs ... --ray``: the files of a document job spread over a Ray cluster.

Each file is translated whole on one worker, by the same
:class:`~edge_translator.documents.job.DocumentJob` a local run uses (its formats, glossary,
checks and warnings). The driver plans the job as a local run does, sends each file's bytes
to an actor and gets the output's bytes back, and writes every output itself, through a
temporary file and a rename, into the job's journal. So the nodes need no shared storage,
one process writes the outputs, and a later run, local or on the cluster, finds them up to
date. Files go in waves of at most ``wave_bytes``, so the driver never holds the archive at once.
The sentences an actor decodes come back with their file and are merged into the driver's
translation memory, as a local run puts them there.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import pickle
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..core import durable
from ..core.errors import EdgeTranslatorError
from ..documents.job import NoProgress, file_sha256, file_stamp, job_settings
from ..documents.journal import Journal
from ..documents.plan import FilePlan, JobOptions, Summary, discover, journal_path
from .blocks import Pair
from .rayrun import cluster_cpus, connect, load_on_node, open_snapshot, with_retries

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileResult:
    """What a worker sends back for one file."""

    index: int
    status: str
    message: str
    warnings: list[str]
    segments: int
    sentences: int
    decoded: int
    reused: int


class _Recorder:
    """A translation memory (or none) that also keeps each pair put into it until :meth:`take`."""

    def __init__(self, inner):
        self.inner = inner
        self.new: list[Pair] = []

    def get(self, key):
        return self.inner.get(key) if self.inner is not None else None

    def put(self, key, value) -> None:
        if self.inner is not None:
            self.inner.put(key, value)
        self.new.append((key, value))

    def take(self) -> list[Pair]:
        new, self.new = self.new, []
        return new


class _DocsActor:
    """One Ray actor: a translator and a scratch folder; one document job per file.

    Ray calls it one file at a time (its pool allows no concurrent calls), so what its
    recorder holds after a file is that file's decoded sentences.
    """

    def __init__(self, model: str | None, threads: int, options: JobOptions, glossary: bytes | None,
                 digest: str, model_id: str, snapshot: bytes | None, record: bool = False):
        from ..documents.glossary import Glossary
        from ..documents.journal import JobCache

        self.scratch = Path(tempfile.mkdtemp(prefix="edge-docs-"))
        memory = open_snapshot(snapshot, "edge-docs-tm-")
        self.recorder = _Recorder(memory) if record else None
        self.cache = JobCache(self.recorder or memory)
        self.translator, self.refusal = load_on_node(model, threads, self.cache, model_id)
        self.glossary = None
        if glossary is not None:
            (self.scratch / "glossary.tsv").write_bytes(glossary)
            self.glossary = Glossary.load(self.scratch / "glossary.tsv")
        self.digest = digest
        self.options = options

    def __call__(self, batch: dict) -> dict:
        out: dict[str, list] = {"result": [], "output": [], "error": [], "pairs": []}
        for index, name, data in zip(batch["index"], batch["name"], batch["data"]):
            result, output, error = None, b"", str(self.refusal or "")
            if not error:
                try:
                    result, output = self._one(int(index), str(name), bytes(data))
                except EdgeTranslatorError as exc:  # the model failed: the job stops, as a local one does
                    error = str(exc)
            out["result"].append(json.dumps(result.__dict__) if result is not None else "")
            out["output"].append(output)
            out["error"].append(error)
            out["pairs"].append(pickle.dumps(self.recorder.take() if self.recorder is not None else []))
        return out

    def _one(self, index: int, name: str, data: bytes) -> tuple[FileResult, bytes]:
        import dataclasses
        import shutil

        from ..documents.job import DocumentJob

        folder = Path(tempfile.mkdtemp(dir=self.scratch))
        try:
            source = folder / "in" / name
            source.parent.mkdir(parents=True)
            source.write_bytes(data)
            options = dataclasses.replace(self.options, output_dir=folder / "out", jobs_dir=folder / "jobs",
                                          force=True, recursive=False)
            job = DocumentJob(self.translator, self.cache, [source], options, self.glossary, self.digest)
            summary = job.run()
            plan = summary.files[0]
            output = plan.output.read_bytes() if plan.status == "done" else b""
            return FileResult(index, plan.status, plan.message if plan.status != "done" else "", plan.warnings,
                              plan.segments, plan.sentences, summary.decoded, summary.reused), output
        finally:
            shutil.rmtree(folder, ignore_errors=True)


class RayDocuments:
    """A document job whose files are translated on a Ray cluster."""

    def __init__(self, inputs: list[Path], options: JobOptions, model: str | None, model_id: str, target: str,
                 glossary: Path | None = None, glossary_digest: str = "", address: str | None = None,
                 cpus_per_actor: int = 1, actors: int | None = None, snapshot: bytes | None = None,
                 wave_bytes: int = 256 << 20, attempts: int = 3, memory=None):
        """Args:
            memory: The translation memory the actors' decoded sentences are merged into
                (``snapshot`` is what they read of it); ``None``: no memory.
        """
        self.inputs, self.options, self.model, self.model_id, self.target = inputs, options, model, model_id, target
        self.memory = memory
        self.glossary = glossary.read_bytes() if glossary is not None else None
        self.digest = glossary_digest
        self.address, self.cpus, self.actors, self.snapshot = address, cpus_per_actor, actors, snapshot
        self.wave_bytes, self.attempts = wave_bytes, attempts
        self.settings = job_settings(model_id, target, options, glossary_digest)

    def run(self, progress=None) -> Summary:
        """Plan, translate on the cluster, write; the summary a local run would give."""
        progress = progress or NoProgress()
        started = time.perf_counter()
        plans = discover(self.inputs, self.options, self.target)
        todo = [p for p in plans if p.status == "todo"]
        path = journal_path(todo, self.options) if todo else None
        journal = Journal(path) if path is not None else None
        decoded = reused = 0
        try:
            for plan in plans:
                if plan.status in ("skipped", "failed"):
                    progress.message(f"{plan.input}: {plan.status}: {plan.message}")
                elif plan.status == "todo":
                    plan.key = os.path.relpath(plan.output.resolve(), path.parent.resolve())
                    try:
                        plan.sha256, plan.stamp = file_sha256(plan.input), file_stamp(plan.input)
                    except OSError as exc:
                        self._fail(plan, f"cannot read it ({exc.strerror})", progress)
                        continue
                    record = journal.record(plan.key)
                    if plan.output.exists():
                        if record is not None and record.state == "written" and record.sha256 == plan.sha256 \
                                and record.settings == self.settings:
                            plan.status, plan.message = "up to date", f"{plan.output} is up to date"
                            plan.warnings = journal.warnings(plan.key)
                            progress.message(f"{plan.input}: up to date")
                        elif record is None and not self.options.force:
                            plan.status, plan.message = "skipped", f"{plan.output} exists; pass --force to overwrite it"
                            progress.message(f"{plan.input}: skipped: {plan.message}")
            todo = [p for p in plans if p.status == "todo"]
            progress.start(len(todo), 0)
            if todo:
                for result, output, pairs in self._translate(todo):
                    self._merge(pairs)
                    decoded += result.decoded
                    reused += result.reused
                    self._land(todo[result.index], result, output, journal, progress)
            for plan in todo:
                if plan.status == "todo":
                    self._fail(plan, "the cluster did not translate it; run the job again", progress)
        finally:
            if journal is not None:
                journal.close()
        return Summary(tuple(plans), sum(p.sentences for p in plans if p.status == "done"), decoded, reused,
                       time.perf_counter() - started, path)

    def _merge(self, pairs: list[Pair]) -> None:
        if self.memory is not None:
            for key, value in pairs:
                self.memory.put(key, value)

    @staticmethod
    def _fail(plan: FilePlan, message: str, progress) -> None:
        plan.status, plan.message = "failed", message
        progress.message(f"{plan.input}: failed: {message}")

    def _land(self, plan: FilePlan, result: FileResult, output: bytes, journal: Journal, progress) -> None:
        """Write one file's output as the local job does, and journal it."""
        plan.segments, plan.sentences, plan.warnings = result.segments, result.sentences, list(result.warnings)
        if result.status != "done":
            return self._fail(plan, result.message, progress)
        try:
            if file_stamp(plan.input) != plan.stamp:
                return self._fail(plan, "it changed while it was translated; run the job again", progress)
            journal.begin(plan.key, str(plan.input), plan.sha256, self.settings, result.segments)
            durable.make_dirs(plan.output.parent)
            durable.write_atomic(plan.output, output, temp=durable.temp_name(plan.output, ".edge-tmp"))
        except OSError as exc:
            return self._fail(plan, f"cannot write {plan.output} ({exc.strerror})", progress)
        journal.written(plan.key)
        for warning in plan.warnings:
            progress.message(f"{plan.input}: warning: {warning}")
        plan.status, plan.message = "done", str(plan.output)
        progress.advance(plan.sentences, plan)
        progress.finished(plan)

    def _waves(self, todo: list[FilePlan]) -> Iterator[list[int]]:
        wave: list[int] = []
        size = 0
        for i, plan in enumerate(todo):
            length = plan.input.stat().st_size
            if wave and size + length > self.wave_bytes:
                yield wave
                wave, size = [], 0
            wave.append(i)
            size += length
        if wave:
            yield wave

    def _translate(self, todo: list[FilePlan]) -> Iterator[tuple[FileResult, bytes, list[Pair]]]:
        ray = connect(self.address)
        for wave in self._waves(todo):
            missing = {i: i for i in wave}
            run_once = functools.partial(self._one_run, todo=todo)
            for _, answer in with_retries(ray, missing, run_once, self.attempts, "files"):
                yield answer

    def _one_run(self, ray, indices: list[int],
                 todo: list[FilePlan]) -> Iterator[tuple[int, tuple[FileResult, bytes, list[Pair]]]]:
        data = ray.data
        items = []
        for i in indices:
            plan = todo[i]
            items.append({"index": i, "name": plan.input.name, "data": plan.input.read_bytes()})
        pool = self.actors or max(1, cluster_cpus(ray) // self.cpus)
        dataset = data.from_items(items, override_num_blocks=len(items)).map_batches(
            _DocsActor, batch_size=1, compute=data.ActorPoolStrategy(size=min(pool, len(items))),
            num_cpus=self.cpus, batch_format="default",
            fn_constructor_kwargs={"model": self.model, "threads": self.cpus, "options": self.options,
                                   "glossary": self.glossary, "digest": self.digest, "model_id": self.model_id,
                                   "snapshot": self.snapshot, "record": self.memory is not None})
        for row in dataset.iter_rows():
            if row["error"]:
                raise EdgeTranslatorError(str(row["error"]))
            result = FileResult(**json.loads(row["result"]))
            yield result.index, (result, bytes(row["output"]), pickle.loads(row["pairs"]))
