"""Translating a sentence corpus as one resumable job, on this machine or on a Ray cluster.

:class:`CorpusJob` is the driver: it finds the input files, checks each whole (a corrupt
file fails alone, with its name), cuts the rows into blocks, hands the blocks not yet
committed to a runner, commits each finished block (:mod:`.state`), and writes a file's
output, with its rows in their order, once all its blocks are in. The runner is where the
translating happens: :class:`LocalRunner` here, :class:`~.rayrun.RayRunner` on a cluster;
both translate a block with the same :class:`~.blocks.BlockTranslator`. A full disk (a
block, the state or an output) stops the job with
:class:`~edge_translator.core.errors.NoSpace`: what was committed stays for the rerun.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..core import diskspace, durable
from ..core.cache import CachedTranslation, CacheKey
from ..core.errors import EdgeTranslatorError, InputError
from ..core.translator import TranslateOptions, Translator
from ..documents.job import NoProgress, Progress, file_sha256, file_stamp
from .blocks import BlockCounts, BlockTranslator, Row
from .corpusio import KINDS, Columns, CorpusError, kind_of, read_texts, write_with
from .state import CorpusState

logger = logging.getLogger(__name__)

STATE_NAME = ".edge-corpus"


@dataclass(frozen=True)
class CorpusOptions:
    """How a corpus job runs."""

    columns: Columns = field(default_factory=Columns)
    """The column read and the columns added."""
    translate: TranslateOptions = field(default_factory=TranslateOptions)
    """Target and decoding options."""
    block_rows: int = 1000
    """Rows in a block: the unit of work sent to a worker and committed at once."""
    force: bool = False
    """Overwrite outputs that exist and are not this job's."""
    blocks_in_flight: int = 2
    """Blocks queued in a local engine at once, so it never waits between blocks."""

    def __post_init__(self) -> None:
        if self.block_rows < 1:
            raise ValueError(f"block_rows must be at least 1, not {self.block_rows}")
        if self.blocks_in_flight < 1:
            raise ValueError(f"blocks_in_flight must be at least 1, not {self.blocks_in_flight}")


@dataclass
class CorpusFile:
    """One input file of the job and what became of it."""

    input: Path
    output: Path
    key: str
    """Its path relative to the input folder: its name in the job's state."""
    status: str = "todo"
    """``todo`` → ``done``; or ``up to date``, ``skipped``, ``failed``."""
    message: str = ""
    rows: int = 0
    blocks: int = 0
    sha256: str = ""
    stamp: tuple[int, int] = (0, 0)
    done: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class Block:
    """Rows ``start``..``start + len(texts)`` of one file: the unit a runner translates."""

    key: str
    index: int
    texts: tuple[str | None, ...]


@dataclass(frozen=True)
class BlockResult:
    """A finished block, as a runner hands it back."""

    key: str
    index: int
    rows: list[Row]
    counts: BlockCounts
    pairs: list[tuple[CacheKey, CachedTranslation]] = field(default_factory=list)
    """Sentences the worker decoded, to merge into the job's translation memory (empty
    where the worker used that memory itself)."""


@dataclass(frozen=True)
class CorpusSummary:
    """What a corpus job did."""

    files: tuple[CorpusFile, ...]
    rows: int
    """Rows translated in this run (blocks committed before it are not counted)."""
    decoded: int
    reused: int
    seconds: float

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    def as_dict(self) -> dict:
        return {"files": [{"input": str(f.input), "output": str(f.output), "status": f.status, "message": f.message,
                           "rows": f.rows} for f in self.files],
                "rows": self.rows, "decoded": self.decoded, "reused": self.reused, "seconds": round(self.seconds, 3)}


class Runner(Protocol):
    """Translates blocks: each one handed back once, in any order."""

    def run(self, blocks: Iterator[Block]) -> Iterator[BlockResult]:
        ...


class LocalRunner:
    """Blocks through one translator in this process, ``blocks_in_flight`` queued at once."""

    def __init__(self, translator: Translator, options: CorpusOptions):
        self.blocks = BlockTranslator(translator, options.translate)
        self.in_flight = options.blocks_in_flight

    def run(self, blocks: Iterator[Block]) -> Iterator[BlockResult]:
        queued: deque = deque()
        try:
            for block in blocks:
                queued.append((block, self.blocks.submit(block.texts)))
                if len(queued) >= self.in_flight:
                    yield self._collect(*queued.popleft())
            while queued:
                yield self._collect(*queued.popleft())
        finally:
            for _, pending in queued:
                self.blocks.cancel(pending)

    def _collect(self, block: Block, pending) -> BlockResult:
        rows, counts, _ = self.blocks.collect(pending)  # the memory is the translator's cache here
        return BlockResult(block.key, block.index, rows, counts)


def settings_of(model_id: str, options: CorpusOptions, target: str) -> str:
    """The digest of everything that changes a job's output: another one redoes the files."""
    t = options.translate
    return hashlib.sha256(json.dumps({
        "model": model_id, "target": target, "beam": t.beam_size, "max_length": t.max_length,
        "guard": t.repetition_guard, "shortlist": t.shortlist, "columns": [options.columns.source,
                                                                            options.columns.output],
        "block_rows": options.block_rows}, sort_keys=True).encode()).hexdigest()[:16]


def plan_files(source: Path, out: Path) -> tuple[list[CorpusFile], Path]:
    """The input files under ``source`` and their outputs under ``out``, and the state folder.

    A file goes to ``out`` (or into ``out`` when that is a folder); a folder is read
    recursively (hidden files and the job's own outputs passed over) and mirrored into ``out``.

    Raises:
        InputError: If ``source`` does not exist, or a file's kind is unknown or differs from ``out``'s.
    """
    if not source.exists():
        raise InputError(f"{source} does not exist; check the path")
    if source.is_dir():
        if out.exists() and not out.is_dir():
            raise InputError(f"{out} is a file; the output of a folder is a folder")
        out_resolved = out.resolve()
        files = []
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source)
            if not path.is_file() or kind_of(path) is None or any(p.startswith(".") for p in rel.parts):
                continue
            if path.resolve().is_relative_to(out_resolved):
                continue
            files.append(CorpusFile(path, out / rel, rel.as_posix()))
        if not files:
            raise InputError(f"{source} holds no corpus files ({', '.join(sorted(KINDS))})")
        return files, out / STATE_NAME
    if kind_of(source) is None:
        raise InputError(f"{source}: unsupported corpus file {source.suffix or '(no suffix)'!r}; "
                         f"give {', '.join(sorted(KINDS))}")
    if out.is_dir() or (not out.exists() and kind_of(out) is None):
        out = out / source.name
    elif kind_of(out) != kind_of(source):
        raise InputError(f"{out} is not a {kind_of(source)} file; the output keeps the input's format "
                         f"(name it {out.with_suffix(source.suffix).name})")
    if out.resolve() == source.resolve():
        raise InputError(f"{out} is the input; give another output")
    return [CorpusFile(source, out, source.name)], out.parent / f".{out.name}{STATE_NAME}"


class CorpusJob:
    """One run of ``edge-translator corpus IN OUT``."""

    def __init__(self, source: Path, out: Path, model_id: str, target: str, options: CorpusOptions | None = None,
                 memory=None):
        """Args:
            source: A corpus file or a folder of them.
            out: The output file, or folder.
            model_id: The checksum of the model that translates (written on every row).
            target: The target variant in effect.
            options: How the job runs.
            memory: A translation memory that new pairs from the runner are merged into
                (``None``: the runner's own cache, if any, is all).
        """
        self.options = options or CorpusOptions()
        self.model_id = model_id
        self.settings = settings_of(model_id, self.options, target)
        self.files, state_folder = plan_files(Path(source), Path(out))
        self.state = CorpusState(state_folder)
        self.memory = memory
        self._progress: Progress = NoProgress()

    def scan(self) -> list[CorpusFile]:
        """Check each file whole and find its committed blocks; the files to do."""
        for plan in self.files:
            self._scan(plan)
        return [p for p in self.files if p.status == "todo"]

    def _fail(self, plan: CorpusFile, message: str) -> None:
        plan.status, plan.message = "failed", message
        self._progress.message(f"{plan.input}: failed: {message}")

    def _scan(self, plan: CorpusFile) -> None:
        try:
            plan.sha256, plan.stamp = file_sha256(plan.input), file_stamp(plan.input)
        except OSError as exc:
            return self._fail(plan, f"cannot read it ({exc.strerror})")
        record = self.state.record(plan.key)
        if plan.output.exists():
            if record and record["written"] and record["sha256"] == plan.sha256 \
                    and record["settings"] == self.settings:
                plan.status, plan.message, plan.rows = "up to date", f"{plan.output} is up to date", record["rows"]
                self._progress.message(f"{plan.input}: up to date")
                return
            if record is None and not self.options.force:
                plan.status, plan.message = "skipped", f"{plan.output} exists; pass --force to overwrite it"
                self._progress.message(f"{plan.input}: skipped: {plan.message}")
                return
        try:
            plan.rows = sum(1 for _ in read_texts(plan.input, self.options.columns))
        except CorpusError as exc:
            return self._fail(plan, str(exc).removeprefix(f"{plan.input}: "))
        size = self.options.block_rows
        plan.blocks = max(1, -(-plan.rows // size))
        plan.done = self.state.begin(plan.key, plan.sha256, self.settings, plan.rows)

    def pending(self, todo: Sequence[CorpusFile]) -> Iterator[Block]:
        """The blocks not committed yet, file after file, read lazily."""
        size = self.options.block_rows
        for plan in todo:
            if plan.status != "todo":
                continue
            block: list[str | None] = []
            index = 0
            try:
                for text in read_texts(plan.input, self.options.columns):
                    block.append(text)
                    if len(block) == size:
                        if index not in plan.done:
                            yield Block(plan.key, index, tuple(block))
                        block, index = [], index + 1
            except CorpusError as exc:
                self._fail(plan, f"changed while it was read ({exc}); run the job again")
                continue
            if (block or index == 0) and index not in plan.done:
                yield Block(plan.key, index, tuple(block))

    def run(self, runner: Runner, progress: Progress | None = None) -> CorpusSummary:
        """Translate every file through ``runner``; returns what happened to each.

        A file that cannot be read is failed and the others go on; a failure of the
        runner (the model, the cluster) stops the job, and what was committed stays.

        Raises:
            NoSpace: If a block, the state or an output cannot be written for lack of space
                (the blocks in flight are withdrawn; a rerun resumes).
        """
        self._progress = progress or NoProgress()
        started = time.perf_counter()
        todo = self.scan()
        by_key = {p.key: p for p in todo}
        self._progress.start(len(todo), sum(p.rows - self._done_rows(p) for p in todo))
        for plan in todo:
            self._write_if_complete(plan)
        rows = decoded = reused = 0
        results = runner.run(self.pending(todo))
        try:
            for result in results:
                plan = by_key[result.key]
                if plan.status != "todo" or result.index in plan.done:
                    continue  # a file failed meanwhile, or a block a retried worker sent twice
                self.state.commit(plan.key, result.index, [list(r) for r in result.rows])
                plan.done.add(result.index)
                self._merge(result.pairs)
                rows += len(result.rows)
                decoded += result.counts.decoded
                reused += result.counts.reused
                self._progress.advance(len(result.rows), plan)
                self._write_if_complete(plan)
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()  # a NoSpace (or Ctrl-C) withdraws the blocks the runner has queued
        for plan in todo:
            if plan.status == "todo":
                missing = plan.blocks - len(plan.done)
                self._fail(plan, f"{missing} of its {plan.blocks} blocks were not translated; run the job again")
        return CorpusSummary(tuple(self.files), rows, decoded, reused, time.perf_counter() - started)

    def _done_rows(self, plan: CorpusFile) -> int:
        size = self.options.block_rows
        return sum(min(size, plan.rows - i * size) for i in plan.done)

    def _merge(self, pairs: Iterable[tuple[CacheKey, CachedTranslation]]) -> None:
        if self.memory is None:
            return
        for key, value in pairs:
            self.memory.put(key, value)

    def _results(self, plan: CorpusFile) -> Iterator[Row]:
        for index in range(plan.blocks):
            for text, score in self.state.rows(plan.key, index):
                yield text, score

    def _write_if_complete(self, plan: CorpusFile) -> None:
        if plan.status != "todo" or len(plan.done) < plan.blocks:
            return
        try:
            if file_stamp(plan.input) != plan.stamp:
                return self._fail(plan, "it changed while it was translated; run the job again")
        except OSError as exc:
            return self._fail(plan, f"cannot read it ({exc.strerror})")
        temp = durable.temp_name(plan.output, ".edge-tmp")
        try:
            durable.make_dirs(plan.output.parent)
            write_with(plan.input, temp, self.options.columns, self._results(plan), self.model_id)
            durable.replace(temp, plan.output)  # fsynced, renamed, its folder fsynced
        except EdgeTranslatorError as exc:
            temp.unlink(missing_ok=True)
            return self._fail(plan, str(exc).removeprefix(f"{plan.input}: "))
        except OSError as exc:
            full = diskspace.no_space(plan.output) if diskspace.is_full(exc) else None  # the free space it met
            temp.unlink(missing_ok=True)
            if full is not None:  # every file after this one would fail too: stop the job
                raise full from None
            return self._fail(plan, f"cannot write {plan.output} ({exc.strerror})")
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        self.state.written(plan.key)
        plan.status, plan.message = "done", str(plan.output)
        self._progress.finished(plan)
