"""A document job's plan: its options, the files it finds, where their outputs and its
journal go, and the summary of what became of each file.

Nothing here translates or reads a document's content; :mod:`.job` runs the plan.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.translator import TranslateOptions
from . import format_for
from .base import FormatInfo, FormatOptions
from .journal import JOURNAL_NAME

_TARGET_SUFFIXES = (".zh-Hans", ".zh-Hant")


@dataclass(frozen=True)
class JobOptions:
    """How a document job runs."""

    output_dir: Path | None = None
    """Write outputs here, mirroring the input tree; ``None``: beside each input."""
    recursive: bool = False
    """Descend into sub-folders of input folders."""
    force: bool = False
    """Overwrite outputs that exist and are not this job's."""
    translate: TranslateOptions = field(default_factory=TranslateOptions)
    """Target and decoding options."""
    format: FormatOptions = field(default_factory=FormatOptions)
    """Options for the formats (CSV columns)."""
    jobs_dir: Path | None = None
    """Where the journal lives; ``None``: the output folder (or the inputs' common folder)."""
    window_chars: int = 12000
    """Characters of source text sent to the engine in one submission."""
    windows_in_flight: int = 2
    """Submissions queued in the engine at once, so it never waits between windows."""

    def __post_init__(self) -> None:
        if self.window_chars < 100:
            raise ValueError(f"window_chars must be at least 100, not {self.window_chars}")
        if self.windows_in_flight < 1:
            raise ValueError(f"windows_in_flight must be at least 1, not {self.windows_in_flight}")


@dataclass
class FilePlan:
    """One input file, where its output goes, and how it went."""

    input: Path
    output: Path
    info: FormatInfo | None
    status: str = "todo"
    """``todo`` → ``done``; or ``up to date``, ``skipped``, ``failed``, ``cancelled``."""
    message: str = ""
    segments: int = 0
    sentences: int = 0
    warnings: list[str] = field(default_factory=list)
    key: str = ""
    sha256: str = ""
    stamp: tuple[int, int] = (0, 0)
    remaining: int = 0
    done: set[int] = field(default_factory=set)
    """Indices of segments the journal already holds (emptied once they are skipped)."""
    exhausted: bool = False
    document: object = None


@dataclass(frozen=True)
class Summary:
    """What a job did."""

    files: tuple[FilePlan, ...]
    sentences: int
    """Sentences in the files translated in this run (done or resumed)."""
    decoded: int
    """Sentences decoded by the model in this run."""
    reused: int
    """Sentences taken from the journal or the translation memory."""
    seconds: float
    journal: Path | None

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def warnings(self) -> list[str]:
        return [f"{f.input}: {w}" for f in self.files for w in f.warnings]

    def as_dict(self) -> dict:
        """The summary for ``--json``."""
        return {
            "done": self.count("done"), "up_to_date": self.count("up to date"), "skipped": self.count("skipped"),
            "failed": self.count("failed"), "cancelled": self.count("cancelled"), "sentences": self.sentences, "decoded": self.decoded,
            "reused": self.reused, "seconds": round(self.seconds, 3), "warnings": self.warnings,
            "journal": str(self.journal) if self.journal else None,
            "files": [{"input": str(f.input), "output": str(f.output), "status": f.status, "message": f.message,
                       "segments": f.segments, "sentences": f.sentences, "warnings": f.warnings}
                      for f in self.files],
        }


def output_path(source: Path, root: Path | None, target: str, output_dir: Path | None,
                suffix: str | None = None) -> Path:
    """Where the translation of ``source`` goes: beside it with ``.zh-Hans`` before the
    suffix (or before ``suffix``, for a format written as another), or under ``output_dir``
    with the tree below ``root`` mirrored."""
    name = f"{source.stem}.{target}{suffix or source.suffix}"
    if output_dir is None:
        return source.with_name(name)
    relative = source.parent.relative_to(root) if root is not None else Path()
    return output_dir / relative / name


def _written_as(info: FormatInfo | None, options: JobOptions) -> str | None:
    """The output's suffix when it differs from the input's (a PDF written as .docx or .md)."""
    if info is not None and info.name == "pdf" and options.format.pdf_output != "pdf":
        return "." + options.format.pdf_output
    return None


def discover(inputs: Sequence[Path], options: JobOptions, target: str) -> list[FilePlan]:
    """The files named by ``inputs`` (files and folders), each with its output path.

    Unsupported files named directly are listed as skipped; in folders, hidden files,
    unsupported suffixes and earlier outputs (``*.zh-Hans.*``) are passed over quietly.

    Raises:
        InputError: If an input does not exist.
    """
    from ..core.errors import InputError

    plans: list[FilePlan] = []
    for given in inputs:
        if not given.exists():
            raise InputError(f"{given} does not exist; check the path")
        if given.is_dir():
            walker = sorted(given.rglob("*") if options.recursive else given.iterdir())
            for path in walker:
                if not path.is_file() or any(part.startswith(".") for part in path.relative_to(given).parts):
                    continue
                info = format_for(path)
                if info is None or Path(path.stem).suffix in _TARGET_SUFFIXES:
                    continue
                plans.append(FilePlan(path, output_path(path, given, target, options.output_dir,
                                                         _written_as(info, options)), info))
        else:
            info = format_for(given)
            plan = FilePlan(given, output_path(given, None, target, options.output_dir, _written_as(info, options)),
                            info)
            if info is None:
                plan.status, plan.message = "skipped", f"unsupported file type {given.suffix or '(none)'!r}"
            plans.append(plan)
    seen: dict[Path, FilePlan] = {}
    inputs_resolved = {p.input.resolve() for p in plans}
    for plan in plans:
        if plan.status != "todo":
            continue
        out = plan.output.resolve()
        if out in inputs_resolved:
            plan.status, plan.message = "failed", f"its output {plan.output} is one of the inputs; use -o OUTDIR"
        elif out in seen:
            plan.status, plan.message = "failed", (f"its output {plan.output} would overwrite the translation of "
                                                   f"{seen[out].input}; rename one, or use -o OUTDIR")
        else:
            seen[out] = plan
    return plans


def journal_path(plans: Sequence[FilePlan], options: JobOptions) -> Path:
    """The journal of a job: in ``jobs_dir`` (named by the job's outputs), in the output
    folder, or in the deepest folder holding every output."""
    outputs = sorted(str(p.output.resolve()) for p in plans)
    if options.jobs_dir is not None:
        digest = hashlib.sha256("\n".join(outputs).encode()).hexdigest()[:16]
        return options.jobs_dir / f"job-{digest}.sqlite"
    if options.output_dir is not None:
        return options.output_dir / JOURNAL_NAME
    common = Path(os.path.commonpath([str(Path(o).parent) for o in outputs])) if outputs else Path.cwd()
    return common / JOURNAL_NAME
