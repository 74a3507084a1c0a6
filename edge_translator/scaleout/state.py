"""A corpus job's committed work: which files are written, and every finished block.

The state lives in a folder beside the outputs. ``state.json`` says, for each input, the
checksum and settings its blocks belong to and whether its output is written; each finished
block is one file, written to a temporary name, fsynced and renamed
(:mod:`~edge_translator.core.durable`), so a block is either wholly there or not at all, even
after a power cut. A rerun skips what is there, which is what makes a killed job, or a
killed node, resume without writing a row twice. A write that finds the disk full raises
:class:`~edge_translator.core.errors.NoSpace` and leaves no partial block or state.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from ..core import diskspace, durable
from ..core.errors import InputError

_VERSION = 1


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


class CorpusState:
    """The state folder of one corpus job."""

    def __init__(self, folder: Path):
        self.folder = folder
        try:
            durable.make_dirs(folder)
        except OSError as exc:
            raise InputError(f"cannot create the job's state folder {folder} ({exc.strerror}); "
                             "choose a writable output") from None
        self._path = folder / "state.json"
        self._files: dict[str, dict] = {}
        if self._path.exists():
            try:
                data = json.loads(self._path.read_text(encoding="utf-8"))
                if data.get("version") != _VERSION:
                    raise ValueError(f"version {data.get('version')}")
                self._files = dict(data["files"])
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(f"{self._path} is damaged ({exc}); remove the folder {folder} to start "
                                 "the job afresh") from None

    def _save(self) -> None:
        with diskspace.writing(self._path):
            durable.write_atomic(self._path, json.dumps({"version": _VERSION, "files": self._files}, indent=1,
                                                        sort_keys=True).encode())

    def record(self, key: str) -> dict | None:
        """What is known of the file ``key``: its ``sha256``, ``settings``, ``rows`` and
        whether it is ``written``."""
        return self._files.get(key)

    def begin(self, key: str, sha256: str, settings: str, rows: int) -> set[int]:
        """Start (or resume) a file; returns the blocks already committed. Blocks of another
        version of the file, or of other settings, are dropped."""
        known = self._files.get(key)
        if known is None or known["sha256"] != sha256 or known["settings"] != settings or known["rows"] != rows:
            shutil.rmtree(self._blocks(key), ignore_errors=True)
            self._files[key] = {"sha256": sha256, "settings": settings, "rows": rows, "written": False}
            self._save()
            return set()
        if known["written"]:
            known["written"] = False
            self._save()
        folder = self._blocks(key)
        return {int(p.stem) for p in folder.glob("*.json")} if folder.is_dir() else set()

    def _blocks(self, key: str) -> Path:
        return self.folder / _digest(key)

    def commit(self, key: str, index: int, rows: list) -> None:
        """Keep one finished block (a second commit of the same block replaces it whole).

        Raises:
            NoSpace: If the disk is full; the block is then not kept.
        """
        folder = self._blocks(key)
        with diskspace.writing(folder / f"{index:06d}.json"):
            durable.make_dirs(folder)
            durable.write_atomic(folder / f"{index:06d}.json", json.dumps(rows, ensure_ascii=False).encode())

    def rows(self, key: str, index: int) -> list:
        """The ``[translation, score]`` rows of a committed block.

        Raises:
            InputError: If the block file is missing or damaged; it is then removed, so the
                next run translates that block again.
        """
        path = self._blocks(key) / f"{index:06d}.json"
        try:
            rows = json.loads(path.read_bytes())
            if not isinstance(rows, list):
                raise ValueError(f"a JSON {type(rows).__name__}, not a list of rows")
            return rows
        except (OSError, ValueError) as exc:
            path.unlink(missing_ok=True)
            raise InputError(f"{path} was missing or damaged ({exc}); run the job again to redo that block") from None

    def written(self, key: str) -> None:
        """The output of ``key`` is complete: its blocks are no longer needed."""
        self._files[key]["written"] = True
        self._save()
        shutil.rmtree(self._blocks(key), ignore_errors=True)
