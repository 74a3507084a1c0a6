"""Sentence corpora on disk: one column of a CSV, TSV, JSON Lines or Parquet file read as rows
of text, and the same file written again with the translation, its score and the model's
checksum added to every row.

CSV and TSV go through :mod:`csv` (the first record is the header; a column is named by its
header or its 1-based number), JSON Lines through :mod:`json` (a column is a key of each
object; blank lines are not rows), Parquet through pyarrow (the extra ``ray``), a record batch
at a time, so no format holds the whole file in memory. A row whose cell is missing, empty or
null has no translation (an empty cell in CSV and TSV, ``null`` elsewhere).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import InputError, require

#: File suffix → corpus kind.
KINDS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}

_BATCH_ROWS = 4096


class CorpusError(InputError):
    """A corpus file cannot be read or written; the message names the file and the fix."""


@dataclass(frozen=True)
class Columns:
    """Which column is read and what the added ones are called."""

    source: str = "text"
    """The column to translate: a header name or key (CSV and TSV: or a 1-based number)."""
    output: str = "translation"
    """The translation's column; its score goes in ``OUTPUT_score`` and the model's checksum
    in ``OUTPUT_model``."""

    @property
    def added(self) -> tuple[str, str, str]:
        return self.output, f"{self.output}_score", f"{self.output}_model"


def kind_of(path: Path) -> str | None:
    """The corpus kind of ``path`` from its suffix, or ``None``."""
    return KINDS.get(path.suffix.lower())


def _fail(path: Path, where: str, reason: str) -> CorpusError:
    return CorpusError(f"{path}: {where}{reason}")


def _open_text(path: Path):
    try:
        return open(path, encoding="utf-8", newline="")
    except OSError as exc:
        raise _fail(path, "", f"cannot read it ({exc.strerror})") from None


def _header_index(path: Path, header: list[str], columns: Columns) -> int:
    names = [h.strip() for h in header]
    for i, name in enumerate(names):
        if name == columns.source.strip():
            index = i
            break
    else:
        if columns.source.isdigit() and 1 <= int(columns.source) <= len(names):
            index = int(columns.source) - 1
        else:
            raise _fail(path, "", f"has no column {columns.source!r}; choose one with --column "
                        f"(its header: {', '.join(repr(n) for n in names[:12]) or 'empty'})")
    for name in columns.added:
        if name in names:
            raise _fail(path, "", f"already has a column {name!r}; name the added ones with --as")
    return index


def _csv_records(path: Path, kind: str) -> Iterator[tuple[int, list[str]]]:
    dialect = "excel-tab" if kind == "tsv" else "excel"
    with _open_text(path) as handle:
        reader = csv.reader(handle, dialect=dialect, strict=True)
        try:
            for record in reader:
                yield reader.line_num, record
        except UnicodeDecodeError as exc:
            raise _fail(path, f"line {reader.line_num + 1}: ", f"is not valid UTF-8 (byte {exc.start} of a "
                        "block); convert it first, e.g. `iconv -f latin1 -t utf-8`") from None
        except csv.Error as exc:
            raise _fail(path, f"line {reader.line_num}: ", f"is not valid {kind.upper()} ({exc})") from None


def _csv_texts(path: Path, kind: str, columns: Columns) -> Iterator[str | None]:
    records = _csv_records(path, kind)
    first = next(records, None)
    if first is None:
        raise _fail(path, "", "is empty; a corpus file starts with a header row")
    index = _header_index(path, first[1], columns)
    for _, record in records:
        value = record[index] if index < len(record) else ""
        yield value if value.strip() else None


def _jsonl_objects(path: Path) -> Iterator[tuple[int, dict]]:
    with _open_text(path) as handle:
        number = 0
        try:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise _fail(path, f"line {number}: ", f"is not JSON ({exc.msg} at column {exc.colno})") from None
                if not isinstance(value, dict):
                    raise _fail(path, f"line {number}: ", f"holds a JSON {type(value).__name__}; each line of a "
                                "JSON Lines corpus is an object")
                yield number, value
        except UnicodeDecodeError:
            raise _fail(path, f"line {number + 1}: ", "is not valid UTF-8; convert it first, e.g. "
                        "`iconv -f latin1 -t utf-8`") from None


def _cell(path: Path, where: str, value, columns: Columns) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise _fail(path, where, f"column {columns.source!r} holds a {type(value).__name__}, not text; "
                    "choose the text column with --column")
    return value


def _jsonl_texts(path: Path, columns: Columns) -> Iterator[str | None]:
    seen = False
    keys: list[str] = []
    for number, obj in _jsonl_objects(path):
        clash = [name for name in columns.added if name in obj]
        if clash:
            raise _fail(path, f"line {number}: ", f"already has a key {clash[0]!r}; name the added ones with --as")
        seen = seen or columns.source in obj
        keys = keys or list(obj)
        yield _cell(path, f"line {number}: ", obj.get(columns.source), columns)
    if keys and not seen:
        raise _fail(path, "", f"has no column {columns.source!r} in any row; choose one with --column "
                    f"(its keys: {', '.join(repr(k) for k in keys[:12])})")


def _parquet(path: Path):
    pq = require("pyarrow.parquet", "ray")
    try:
        return pq.ParquetFile(path)
    except OSError as exc:
        raise _fail(path, "", f"cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    except Exception as exc:  # pyarrow raises ArrowInvalid and friends for damaged files
        raise _fail(path, "", f"is not a readable Parquet file ({str(exc).splitlines()[0]})") from None


def _parquet_texts(path: Path, columns: Columns) -> Iterator[str | None]:
    handle = _parquet(path)
    names = handle.schema_arrow.names
    if columns.source not in names:
        raise _fail(path, "", f"has no column {columns.source!r}; choose one with --column "
                    f"(its columns: {', '.join(repr(n) for n in names[:12])})")
    for name in columns.added:
        if name in names:
            raise _fail(path, "", f"already has a column {name!r}; name the added ones with --as")
    row = 0
    try:
        for batch in handle.iter_batches(batch_size=_BATCH_ROWS, columns=[columns.source]):
            for value in batch.column(0).to_pylist():
                row += 1
                yield _cell(path, f"row {row}: ", value, columns)
    except CorpusError:
        raise
    except Exception as exc:
        raise _fail(path, f"row {row + 1}: ", f"cannot be read ({str(exc).splitlines()[0]})") from None


def read_texts(path: Path, columns: Columns) -> Iterator[str | None]:
    """The chosen column of every row of ``path``, in order; ``None`` where a row has none.

    Raises:
        CorpusError: If the file cannot be read, is malformed, or lacks the column.
        MissingDependencyError: For Parquet without pyarrow.
    """
    kind = kind_of(path)
    if kind in ("csv", "tsv"):
        return _csv_texts(path, kind, columns)
    if kind == "jsonl":
        return _jsonl_texts(path, columns)
    if kind == "parquet":
        return _parquet_texts(path, columns)
    raise CorpusError(f"{path}: unsupported corpus file {path.suffix or '(no suffix)'!r}; "
                      f"give {', '.join(sorted(KINDS))}")


def _score(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else round(value, 6)


def write_with(path: Path, out: Path, columns: Columns, results: Iterable[tuple[str | None, float | None]],
               model: str) -> int:
    """Write ``path``'s rows to ``out`` with the added columns filled from ``results`` (one
    ``(translation, score)`` per row, in order). Returns the rows written.

    Raises:
        CorpusError: If the file or ``results`` run out before the other, or ``out`` cannot be written.
    """
    kind = kind_of(path)
    rows = iter(results)

    def take(where: str) -> tuple[str | None, float | None]:
        try:
            return next(rows)
        except StopIteration:
            raise _fail(path, where, "has more rows than when it was read; run the job again") from None

    try:
        if kind in ("csv", "tsv"):
            count = _write_csv(path, kind, out, columns, take, model)
        elif kind == "jsonl":
            count = _write_jsonl(path, out, take, model, columns)
        else:
            count = _write_parquet(path, out, columns, take, model)
    except OSError as exc:
        raise CorpusError(f"cannot write {out} ({exc.strerror})") from None
    if next(rows, None) is not None:
        raise _fail(path, "", "has fewer rows than when it was read; run the job again")
    return count


def _write_csv(path: Path, kind: str, out: Path, columns: Columns, take, model: str) -> int:
    records = _csv_records(path, kind)
    _, header = next(records)
    width = len(header)
    with open(out, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, dialect="excel-tab" if kind == "tsv" else "excel", lineterminator="\n")
        writer.writerow([*header, *columns.added])
        count = 0
        for line, record in records:
            text, score = take(f"line {line}: ")
            padded = record + [""] * (width - len(record))
            writer.writerow([*padded, text or "", "" if _score(score) is None else _score(score),
                             model if text is not None else ""])
            count += 1
    return count


def _write_jsonl(path: Path, out: Path, take, model: str, columns: Columns) -> int:
    name, score_name, model_name = columns.added
    with open(out, "w", encoding="utf-8", newline="\n") as handle:
        count = 0
        for number, obj in _jsonl_objects(path):
            text, score = take(f"line {number}: ")
            obj[name], obj[score_name], obj[model_name] = text, _score(score), model if text is not None else None
            handle.write(json.dumps(obj, ensure_ascii=False) + "\n")
            count += 1
    return count


def _write_parquet(path: Path, out: Path, columns: Columns, take, model: str) -> int:
    pa = require("pyarrow", "ray")
    pq = require("pyarrow.parquet", "ray")
    source = _parquet(path)
    name, score_name, model_name = columns.added
    schema = source.schema_arrow.append(pa.field(name, pa.string())).append(
        pa.field(score_name, pa.float64())).append(pa.field(model_name, pa.string()))
    count = 0
    with pq.ParquetWriter(out, schema) as writer:
        for batch in source.iter_batches(batch_size=_BATCH_ROWS):
            got = [take(f"row {count + i + 1}: ") for i in range(batch.num_rows)]
            count += batch.num_rows
            texts = [t for t, _ in got]
            arrays = [*batch.columns, pa.array(texts, pa.string()), pa.array([_score(s) for _, s in got], pa.float64()),
                      pa.array([model if t is not None else None for t in texts], pa.string())]
            writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
    return count
