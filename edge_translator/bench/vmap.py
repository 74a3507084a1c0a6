"""CTranslate2's vocabulary map written from a bundle's shortlist, so that ``bench`` can time
CTranslate2 with ``use_vmap=True`` on the same candidate lists as our restricted output layer.

A ratio to CTranslate2 without its map compares a full output layer with a shortlisted one;
with the map written from the same lists, both compute the same rows at batch 1. (With
more sentences, CTranslate2 restricts the whole batch to the union of its rows' sets, where
we restrict each row to its own.)

CTranslate2 reads ``vmap.txt`` from the converted model's directory (``register_vocabulary_mapping``
in ``ctranslate2/specs/model_spec.py``, ``src/models/sequence_to_sequence.cc``), one rule a line
(``src/vocabulary_map.cc``): ``SOURCE<TAB>TARGET TARGET ...``, where SOURCE is an n-gram of
source tokens joined by spaces and the targets are target tokens. A line with an empty SOURCE
lists the targets always allowed. The candidates of a batch are those always allowed, ``<unk>``,
its bos and eos tokens and the decoder's start token (for Marian, ``<unk>`` and ``</s>``:
``<s>`` is not in its vocabulary; our ``always`` holds both), and the targets of every source
n-gram in the batch.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..core.shortlist import Shortlist

#: The file name CTranslate2 looks for in a model directory.
VMAP_FILE = "vmap.txt"
#: Characters CTranslate2's map parser splits on, or that end its line.
_SEPARATORS = (" ", "\t", "\n", "\r")


def write_vmap(shortlist: Shortlist, vocab: dict[str, int], out_dir: str | Path) -> Path:
    """Write ``vmap.txt`` into ``out_dir``: ``always`` on the empty-source line, then one line per
    source piece that has candidates (one piece each: 1-grams only), pieces as ``vocab.json`` spells them.

    Args:
        shortlist: The bundle's lists (:func:`~edge_translator.core.shortlist.read_shortlist`).
        vocab: The bundle's ``vocab.json`` (piece → id), whose ids the lists hold.
        out_dir: A CTranslate2 model directory (existing).

    Returns:
        The file written.

    Raises:
        ValueError: If ``vocab`` does not have the shortlist's size or lacks one of its ids,
            or a piece it writes is empty or holds a space, tab or line break (the format
            cannot hold it).
    """
    pieces = {i: p for p, i in vocab.items()}
    if len(pieces) != shortlist.vocab_size or set(pieces) != set(range(shortlist.vocab_size)):
        raise ValueError(f"the vocabulary has {len(vocab)} pieces ({len(pieces)} ids), but the shortlist is for "
                         f"ids 0..{shortlist.vocab_size - 1}: give the vocab.json of the shortlist's bundle")

    def piece(i: int) -> str:
        text = pieces[int(i)]
        if not text or any(c in text for c in _SEPARATORS):
            raise ValueError(f"vocabulary piece {text!r} (id {int(i)}) cannot be written to CTranslate2's vmap: "
                             "its pieces are split on spaces and tabs")
        return text

    lines = ["\t" + " ".join(piece(i) for i in shortlist.always)]
    for s in range(shortlist.vocab_size):
        targets = shortlist.candidates_of(s)
        if len(targets):
            lines.append(piece(s) + "\t" + " ".join(piece(t) for t in targets))
    path = Path(out_dir) / VMAP_FILE
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def vmap_model(ct2_dir: str | Path, shortlist: Shortlist, vocab: dict[str, int]) -> Path:
    """A sibling of ``ct2_dir``, ``<name>-vmap``, holding its files (hard links, or copies where
    links fail) and a ``vmap.txt`` written from ``shortlist``; made afresh on every call, so that
    it follows a model converted again. ``ct2_dir`` itself is left as it is: CTranslate2 without
    the map loads and measures (its size included) what it did before.

    Returns:
        The new model directory.

    Raises:
        ValueError: As :func:`write_vmap`.
    """
    ct2_dir = Path(ct2_dir)
    out = ct2_dir.with_name(ct2_dir.name + "-vmap")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for src in ct2_dir.iterdir():
        if src.is_file() and src.name != VMAP_FILE:
            try:
                os.link(src, out / src.name)
            except OSError:
                shutil.copy2(src, out / src.name)
    write_vmap(shortlist, vocab, out)
    return out
