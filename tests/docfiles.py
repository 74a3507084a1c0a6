"""What the format tests share: a file's parts, a write through a format, a bad file in a job."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

from .conftest import run_cli


def parts(data: bytes) -> dict[str, bytes]:
    """A zip package's parts by name, in the archive's order."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def write_with(fmt, path: Path, translate, options) -> bytes:
    """The bytes ``fmt`` writes for ``path`` with each segment through ``translate``."""
    doc = fmt.open(path, options)
    out = io.BytesIO()
    doc.write((translate(seg) for seg in doc.segments()), out)
    return out.getvalue()


def fails_alone(tmp_path: Path, good: Path, bad: Path, words: str) -> None:
    """A job on a good file and ``bad``: the bad one fails in one line holding ``words``,
    the good one is done, no other output is written, and ``bad`` is not modified."""
    digest = hashlib.sha256(bad.read_bytes()).hexdigest()
    result = run_cli("docs", str(good), str(bad), "-o", str(tmp_path / "out"), "--no-tm", "--json")
    assert result.returncode != 0
    by_name = {Path(f["input"]).name: f for f in json.loads(result.stdout)["files"]}
    assert by_name[good.name]["status"] == "done"
    failed = by_name[bad.name]
    assert failed["status"] == "failed" and words in failed["message"], failed
    assert "\n" not in failed["message"] and "Traceback" not in result.stderr.decode()
    written = sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith("."))
    assert written == [f"{good.stem}.zh-Hans{good.suffix}"]
    assert hashlib.sha256(bad.read_bytes()).hexdigest() == digest
