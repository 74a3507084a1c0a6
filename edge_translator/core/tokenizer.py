"""Marian tokenization: SentencePiece pieces ↔ joint-vocabulary ids, with the target token.

Source text becomes ``[target token] + pieces + [</s>]``, the ids that transformers'
``MarianTokenizer`` gives for ``">>cmn_Hans<< " + text``. Output ids become text the way
its ``decode(..., skip_special_tokens=True)`` does.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from .errors import BundleError

logger = logging.getLogger(__name__)

SPIECE_UNDERLINE = "▁"


def _load_spm(path: Path):
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.Load(str(path))
    except (OSError, RuntimeError) as exc:
        raise BundleError(
            f"{path} is not a valid SentencePiece model ({exc}); copy the bundle again"
        ) from None
    return processor


class Tokenizer:
    """Converts between text and the ids of one Marian model."""

    def __init__(self, source, target, vocab: dict[str, int], eos_id: int, unk_id: int, pad_id: int):
        """Build from loaded parts; use :meth:`load` for a bundle's files.

        Args:
            source: ``SentencePieceProcessor`` of the source language.
            target: ``SentencePieceProcessor`` of the target language.
            vocab: The joint vocabulary, piece → id.
            eos_id: Id of ``</s>``.
            unk_id: Id of ``<unk>``.
            pad_id: Id of ``<pad>``.
        """
        self.source = source
        self.target = target
        self.vocab = vocab
        self.eos_id = eos_id
        self.unk_id = unk_id
        self.pad_id = pad_id
        self.pieces = {i: piece for piece, i in vocab.items()}
        self.special_ids = {eos_id, unk_id, pad_id}

    @classmethod
    def load(cls, source_spm: Path, target_spm: Path, vocab_json: Path, eos_id: int, unk_id: int,
             pad_id: int) -> Tokenizer:
        """Load the two SentencePiece models and the vocabulary from files.

        Raises:
            BundleError: If a file is missing or unreadable.
        """
        try:
            vocab = json.loads(Path(vocab_json).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise BundleError(f"{vocab_json} is not a readable JSON vocabulary ({exc})") from None
        if not isinstance(vocab, dict):
            raise BundleError(f"{vocab_json} must map pieces to ids")
        return cls(_load_spm(Path(source_spm)), _load_spm(Path(target_spm)), vocab, eos_id, unk_id, pad_id)

    def pieces_of(self, text: str) -> list[str]:
        """Source SentencePiece pieces of ``text``."""
        return self.source.encode(text, out_type=str)

    def encode(self, text: str, target_id: int | None = None) -> list[int]:
        """Source ids: the target token (if given), the pieces, then ``</s>``.

        Args:
            text: One sentence of source text.
            target_id: Vocabulary id of the target-language token, e.g. ``>>cmn_Hans<<``.
        """
        ids = [] if target_id is None else [target_id]
        unk = self.unk_id
        ids.extend(self.vocab.get(piece, unk) for piece in self.pieces_of(text))
        ids.append(self.eos_id)
        return ids

    def decode(self, ids) -> str:
        """Text of output ids; special ids (``</s>``, ``<unk>``, ``<pad>``) are dropped."""
        pieces = [self.pieces.get(int(i), "") for i in ids if int(i) not in self.special_ids]
        text = self.target.decode_pieces([p for p in pieces if p])
        return text.replace(SPIECE_UNDERLINE, " ").strip()
