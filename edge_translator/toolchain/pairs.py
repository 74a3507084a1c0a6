"""English–Chinese pairs files: the one reader of the TSVs that ``eval``, ``shortlist`` and
``export --shortlist-corpus`` take.

Either Tatoeba's four columns ``cmn_id, zh, en_id, en`` (the files ``train-demo`` writes)
or two columns ``en, zh``; UTF-8.
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import InputError


def read_eval_pairs(path: str | Path, limit: int | None = None) -> tuple[list[str], list[str]]:
    """English sources and Chinese references from a TSV.

    Raises:
        InputError: If the file is missing, not UTF-8, or has no usable rows.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except FileNotFoundError:
        raise InputError(f"pairs file {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"pairs file {path} is not UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"cannot read {path} ({exc.strerror or exc})") from None
    sources, references = [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) == 4:
            zh, en = cols[1], cols[3]
        elif len(cols) == 2:
            en, zh = cols
        else:
            raise InputError(f"{path}:{number}: expected 2 columns (en, zh) or 4 (cmn_id, zh, en_id, en), "
                             f"found {len(cols)}")
        sources.append(en.strip())
        references.append(zh.strip())
    if not sources:
        raise InputError(f"pairs file {path} has no pairs")
    if limit:
        sources, references = sources[:limit], references[:limit]
    return sources, references
