"""Vocabulary shortlists: for every source piece, the target pieces a translation of it may need.

At batch 1 the output layer (vocabulary × d_model) is most of the bytes a decoder step reads;
a sentence needs a few thousand of its rows, not all of them. ``export --shortlist`` builds the
candidate lists here and stores them in the bundle as ``shortlist.bin`` (checksummed like every
other file); the runtime restricts each row's output to ``always`` ∪ the candidates of its own
source ids, so that a sentence never depends on its batch-mates.

``shortlist.bin`` holds little-endian int32 arrays one after another, no header:

* ``always [A]``: ids always allowed (``</s>``, ``<unk>``, the N most frequent target tokens),
  sorted, unique, never ``<pad>`` nor a ``>>lang<<`` token;
* ``offsets [V+1]``: V = ``len(vocab.json)``; the candidates of source id ``s`` are
  ``candidates[offsets[s]:offsets[s+1]]``;
* ``candidates [C]``: each slice sorted and unique, never ``<pad>``, a ``>>lang<<`` token or an
  id already in ``always``.

``bundle.json``'s ``shortlist`` entry (:func:`write_shortlist`) gives A, V and C.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import ExportError, InputError
from ..core.shortlist import SHORTLIST_FILE, Shortlist, read_shortlist  # noqa: F401 (read_shortlist: for callers)
from ..core.tokenizer import SPIECE_UNDERLINE, Tokenizer
from .pairs import read_eval_pairs

logger = logging.getLogger(__name__)

#: Target pieces kept per source piece (beyond ``always``), and the most frequent target
#: tokens always allowed: chosen by ``edge-translator shortlist-curve`` on the embedded model,
#: whose output then equals the whole vocabulary's on 99.96% of the Tatoeba test split and all
#: of the benchmark prose; k 100 with N 2,000 also passes 99% on both, by less (99.33% of the
#: prose), for a fifth fewer columns (docs/benchmarks.md#vocabulary-shortlist).
DEFAULT_TOP_K = 50
DEFAULT_FREQUENT = 4000
#: Sentences per greedy batch when the model translates the default corpus.
BATCH_SIZE = 32
#: English shipped with the toolchain (package data; licences in ``corpus/README.md``): the
#: Tatoeba training split's English side, and two Sherlock Holmes stories that are not the
#: benchmark's "A Scandal in Bohemia". Never the test split, where the quality gates are measured.
CORPUS_FILES = ("corpus/tatoeba-en.txt", "corpus/doyle-en.txt")
#: Co-occurring (source, target) pairs counted per ``np.unique`` call, to bound memory.
_PAIR_CHUNK = 1 << 22
_LANG_TOKEN = re.compile(r"^>>.+<<$")


@dataclass(frozen=True)
class ShortlistOptions:
    """How many candidates a shortlist keeps."""

    top_k: int = DEFAULT_TOP_K
    """Target pieces kept per source piece, by Dice score, not counting those in ``always``."""
    frequent: int = DEFAULT_FREQUENT
    """Most frequent target tokens of the corpus, always allowed."""
    ascii: bool = True
    """Also always allow the target pieces of every printable ASCII character (:func:`ascii_pieces`)."""

    def __post_init__(self) -> None:
        if not (isinstance(self.top_k, int) and self.top_k >= 0):
            raise ValueError(f"shortlist top-k must be a whole number of at least 0, not {self.top_k!r}")
        if not (isinstance(self.frequent, int) and self.frequent >= 0):
            raise ValueError(f"shortlist frequent must be a whole number of at least 0, not {self.frequent!r}")


# -- corpora ------------------------------------------------------------------------------


def read_corpus(path: str | Path) -> list[tuple[str, str]]:
    """``(english, chinese)`` pairs of a TSV: ``en<TAB>zh``, or Tatoeba's ``cmn_id, zh, en_id, en``.

    Raises:
        InputError: If the file is missing, unreadable, not UTF-8, empty, or a line has another
            number of columns.
    """
    try:
        english, chinese = read_eval_pairs(path)
    except InputError as exc:
        raise InputError(f"shortlist corpus: {exc}") from None
    return list(zip(english, chinese))


def default_sentences() -> tuple[list[str], str]:
    """The English shipped with the toolchain, and a line naming it for ``built_from``."""
    from importlib import resources

    sentences = []
    for name in CORPUS_FILES:
        try:
            text = (resources.files(__package__) / name).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ExportError(f"{name} is missing from the installed toolchain; reinstall edge-translator, "
                              "or give pairs with --shortlist-corpus") from None
        sentences.extend(line.strip() for line in text.splitlines() if line.strip())
    return sentences, "edge_translator/toolchain/corpus (Tatoeba train split, CC BY 2.0 FR; Conan Doyle, public domain)"


def corpus_ids(tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Source piece ids (no target token, no ``</s>``) and target piece ids of each pair, tokenized
    with the bundle's own SentencePiece models (``target.spm`` for the Chinese)."""
    vocab, unk, target = tokenizer.vocab, tokenizer.unk_id, tokenizer.target
    joint = [unk if target.is_unknown(i) else vocab.get(target.id_to_piece(i), unk)
             for i in range(target.get_piece_size())]  # target.spm id → joint id; unknown characters → <unk>
    encoded = target.encode([zh for _, zh in pairs])
    return [(np.asarray(tokenizer.encode(en)[:-1], np.int64), np.asarray([joint[i] for i in ids], np.int64))
            for (en, _), ids in zip(pairs, encoded)]


def translation_ids(model, tokenizer: Tokenizer, target_id: int, sentences: Sequence[str],
                    batch_size: int = BATCH_SIZE, shortlist: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
    """Source piece ids and the model's own greedy output ids of each sentence.

    This is how Mozilla builds its shortlists, from the teacher's output: the lists then hold
    what this model actually says, in its own pieces (a piece of either vocabulary). Decoding
    is the runtime's: batches of ``batch_size`` sorted by length, the length limit and the
    repetition guard of :class:`~edge_translator.core.translator.Translator`'s defaults.
    Sentences longer than the model's positions are left out.

    Args:
        model: A :class:`~edge_translator.core.decode.Seq2Seq` of the bundle.
        shortlist: Decode under the bundle's shortlist (default: the whole vocabulary).
    """
    from ..core.greedybatch import RepetitionGuard

    limit = model.bundle.max_positions
    encoded = [tokenizer.encode(s, target_id) for s in sentences]
    order = sorted((i for i, e in enumerate(encoded) if len(e) <= limit), key=lambda i: len(encoded[i]))
    if len(order) < len(encoded):
        logger.info("shortlist: left out %d sentences longer than %d tokens", len(encoded) - len(order), limit)
    guard, pairs = RepetitionGuard(), []
    for start in range(0, len(order), batch_size):
        sources = [encoded[i] for i in order[start:start + batch_size]]
        limits = [max(1, min(2 * len(s) + 10, limit)) for s in sources]
        for source, hyp in zip(sources, model.greedy_all(sources, limits, guard=guard, shortlist=shortlist)):
            pairs.append((np.asarray(source[1:-1], np.int64), np.asarray(hyp.ids, np.int64)))
    return pairs


# -- counting -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Counts:
    """Sentence-level counts of a tokenized parallel corpus."""

    pairs: int
    """Sentence pairs counted."""
    keys: np.ndarray
    """``s * V + t`` of every co-occurring (source, target) id pair, sorted, unique."""
    together: np.ndarray
    """c(s, t): sentences holding both, per key."""
    source: np.ndarray
    """c(s): sentences holding source id s, ``[V]``."""
    target: np.ndarray
    """c(t): sentences holding target id t, ``[V]``."""
    frequency: np.ndarray
    """Occurrences of each target id on the target side, ``[V]``."""


def count(pairs: Sequence[tuple[np.ndarray, np.ndarray]], vocab_size: int) -> Counts:
    """Count each id once per sentence, and each co-occurring pair once per sentence pair."""
    v = vocab_size
    sources, targets, frequency = [], [], np.zeros(v, np.int64)
    for src, tgt in pairs:
        if len(src) and len(tgt):
            sources.append(np.unique(src))
            targets.append(np.unique(tgt))
            frequency += np.bincount(tgt, minlength=v)
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    start = 0
    while start < len(sources):
        end, size = start, 0
        while end < len(sources) and (end == start or size + len(sources[end]) * len(targets[end]) <= _PAIR_CHUNK):
            size += len(sources[end]) * len(targets[end])
            end += 1
        parts.append(np.unique(_pair_keys(sources[start:end], targets[start:end], v), return_counts=True))
        start = end
    if parts:
        keys, inverse = np.unique(np.concatenate([k for k, _ in parts]), return_inverse=True)
        together = np.bincount(inverse, weights=np.concatenate([c for _, c in parts])).astype(np.int64)
    else:
        keys, together = np.zeros(0, np.int64), np.zeros(0, np.int64)
    flat = (lambda arrays: np.concatenate(arrays) if arrays else np.zeros(0, np.int64))
    return Counts(len(sources), keys, together, np.bincount(flat(sources), minlength=v),
                  np.bincount(flat(targets), minlength=v), frequency)


def _pair_keys(sources: list[np.ndarray], targets: list[np.ndarray], v: int) -> np.ndarray:
    """``s * V + t`` of every (source, target) pair within each sentence pair, without a Python loop."""
    ls = np.asarray([len(s) for s in sources], np.int64)
    lt = np.asarray([len(t) for t in targets], np.int64)
    per = ls * lt
    sentence = np.repeat(np.arange(len(per)), per)
    j = np.arange(per.sum()) - np.repeat(np.cumsum(per) - per, per)
    s = np.concatenate(sources)[(np.cumsum(ls) - ls)[sentence] + j // lt[sentence]]
    t = np.concatenate(targets)[(np.cumsum(lt) - lt)[sentence] + j % lt[sentence]]
    return s * v + t


# -- the candidate lists --------------------------------------------------------------------


def copy_through(tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """The target-vocabulary ids that copy each source piece's text: ``(source ids, target ids)``.

    With separate source and target SentencePiece models, a name, number or URL can be copied
    only through target pieces (mozilla/translations#1192). A source piece's text ('▁'
    stripped) is encoded with ``target.spm`` twice: as a word start (the model's dummy prefix)
    and inside a word (prefix off; skipped when protobuf, of the ``export`` extra, is missing),
    plus the piece itself and its bare text when they are target pieces. Only pieces of
    ``target.spm`` count: a character it does not know comes back as itself, and may name a
    source-only id of the joint vocabulary that the target side would decode as unknown.
    """
    vocab, target = tokenizer.vocab, tokenizer.target
    source = tokenizer.source
    pieces = [source.id_to_piece(i) for i in range(source.get_piece_size())
              if not (source.is_control(i) or source.is_unknown(i))]
    pieces = [p for p in pieces if p in vocab]
    target_pieces = {target.id_to_piece(i) for i in range(target.get_piece_size())
                     if not (target.is_control(i) or target.is_unknown(i))}
    texts = [p.replace(SPIECE_UNDERLINE, " ").strip() for p in pieces]
    encodings = [target.encode(texts, out_type=str)]
    inner = _without_dummy_prefix(target)
    if inner is not None:
        encodings.append(inner.encode(texts, out_type=str))
    src, tgt = [], []
    for index, (piece, text) in enumerate(zip(pieces, texts)):
        ids = {vocab[q] for q in (piece, text, *(q for encoded in encodings for q in encoded[index]))
               if q in target_pieces and q in vocab}
        src.extend([vocab[piece]] * len(ids))
        tgt.extend(ids)
    return np.asarray(src, np.int64), np.asarray(tgt, np.int64)


def _without_dummy_prefix(processor):
    """A copy of a SentencePiece model that does not add '▁' before the text, or ``None``."""
    try:
        import sentencepiece
        from sentencepiece import sentencepiece_model_pb2
    except ImportError:
        logger.info("shortlist: protobuf is missing, so copy-through covers word starts only")
        return None
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(processor.serialized_model_proto())
    proto.normalizer_spec.add_dummy_prefix = False
    return sentencepiece.SentencePieceProcessor(model_proto=proto.SerializeToString())


def ascii_pieces(tokenizer: Tokenizer) -> np.ndarray:
    """The target pieces of every printable ASCII character, alone and as a word start.

    Always allowed, so that anything in ASCII (an e-mail address, a URL, a product code) can be
    spelled character by character even where the source vocabulary lacks a character, which
    the source side then reads as unknown and copy-through cannot follow (``@`` in the demo
    model's source vocabulary).
    """
    vocab, target = tokenizer.vocab, tokenizer.target
    known = {target.id_to_piece(i) for i in range(target.get_piece_size())
             if not (target.is_control(i) or target.is_unknown(i))}
    chars = [chr(c) for c in range(0x21, 0x7F)]
    return np.asarray(sorted({vocab[p] for c in chars for p in (c, SPIECE_UNDERLINE + c) if p in known and p in vocab}),
                      np.int64)


def excluded_ids(tokenizer: Tokenizer) -> np.ndarray:
    """Ids never in a list: ``<pad>`` and the ``>>lang<<`` tokens (the model must not say them)."""
    ids = {tokenizer.pad_id} | {i for piece, i in tokenizer.vocab.items() if _LANG_TOKEN.match(piece)}
    return np.asarray(sorted(ids), np.int64)


def build_shortlist(tokenizer: Tokenizer, pairs: Sequence[tuple[np.ndarray, np.ndarray]],
                    options: ShortlistOptions | None = None) -> Shortlist:
    """Build the candidate lists from tokenized sentence pairs.

    A source piece keeps its ``top_k`` target pieces by the Dice coefficient
    ``2 c(s,t) / (c(s) + c(t))``, each id counted once per sentence. Plain co-occurrence
    p(t|s) ranks the most frequent target tokens first for every source piece, and those are
    in ``always`` already; Dice is high only when s and t mostly occur together, so it ranks a
    word's translation above the tokens that merely occur everywhere (and, unlike
    c(s,t)²/(c(s)c(t)), it is the standard association score of alignment work, bounded by 1).
    Ids in ``always`` are removed before ranking, so ``top_k`` counts new candidates only; ties
    go to the larger c(s,t), then the smaller id. Every source piece also gets its
    :func:`copy_through` ids; one absent from the corpus gets only those.

    Args:
        tokenizer: The bundle's tokenizer.
        pairs: ``(source piece ids, target ids)`` per sentence (:func:`corpus_ids` or
            :func:`translation_ids`).
        options: ``top_k`` and ``frequent``.
    """
    options = options or ShortlistOptions()
    v = len(tokenizer.vocab)
    counts = count(pairs, v)
    bad = np.zeros(v, bool)
    bad[excluded_ids(tokenizer)] = True
    frequency = np.where(bad, 0, counts.frequency)
    order = np.lexsort((np.arange(v), -frequency))[:options.frequent]
    always = np.union1d(order[frequency[order] > 0], [tokenizer.eos_id, tokenizer.unk_id])
    if options.ascii:
        always = np.union1d(always, ascii_pieces(tokenizer))
    always = always[~bad[always]]
    drop = bad.copy()
    drop[always] = True

    s, t = counts.keys // v, counts.keys % v
    keep = ~drop[t]
    s, t, together = s[keep], t[keep], counts.together[keep]
    dice = 2.0 * together / (counts.source[s] + counts.target[t])
    order = np.lexsort((t, -together, -dice, s))
    s, t = s[order], t[order]
    rank = np.arange(len(s)) - np.searchsorted(s, s, side="left")
    top_s, top_t = s[rank < options.top_k], t[rank < options.top_k]

    copy_s, copy_t = copy_through(tokenizer)
    all_s, all_t = np.concatenate([top_s, copy_s]), np.concatenate([top_t, copy_t])
    keys = np.unique(all_s[~drop[all_t]] * v + all_t[~drop[all_t]])
    offsets = np.concatenate([[0], np.cumsum(np.bincount(keys // v, minlength=v))])
    return Shortlist(always.astype(np.int32), offsets.astype(np.int32), (keys % v).astype(np.int32))


# -- the file -------------------------------------------------------------------------------


def write_shortlist(directory: str | Path, shortlist: Shortlist, options: ShortlistOptions, built_from: str) -> dict:
    """Write ``shortlist.bin`` into a bundle directory.

    Returns:
        The manifest entry, ``bundle.json``'s ``shortlist``.
    """
    arrays = (shortlist.always, shortlist.offsets, shortlist.candidates)
    np.concatenate([np.asarray(a, np.int64) for a in arrays]).astype("<i4").tofile(Path(directory) / SHORTLIST_FILE)
    return {"file": SHORTLIST_FILE, "always": len(shortlist.always), "vocab": shortlist.vocab_size,
            "candidates": len(shortlist.candidates), "top_k": options.top_k, "frequent": options.frequent,
            "copy_through": True, "built_from": built_from}


# -- building it at export, and measuring it ---------------------------------------------------


def shortlist_for_bundle(directory: Path, model, tokenizer: Tokenizer, target_id: int,
                         corpus: Sequence[tuple[str, str]] | None, corpus_name: str | None,
                         options: ShortlistOptions, english: tuple[Sequence[str], str] | None = None) -> dict:
    """Build the lists from ``corpus`` (or the model's own translations of ``english``,
    ``(sentences, where they come from)``, by default :func:`default_sentences`), write
    ``shortlist.bin`` into ``directory`` and return its manifest entry."""
    started = time.perf_counter()
    if corpus is not None:
        pairs = corpus_ids(tokenizer, corpus)
        built_from = f"{corpus_name}: {len(corpus)} pairs"
    else:
        sentences, source = english if english is not None else default_sentences()
        pairs = translation_ids(model, tokenizer, target_id, sentences)
        built_from = f"the model's own greedy translations of {len(pairs)} English sentences from {source}"
    shortlist = build_shortlist(tokenizer, pairs, options)
    entry = write_shortlist(directory, shortlist, options, built_from)
    logger.info("shortlist: %d always, %d candidates, from %s (%.1f s)", entry["always"], entry["candidates"],
                built_from, time.perf_counter() - started)
    return entry


def coverage(shortlist: Shortlist, pairs: Iterable[tuple[Sequence[int], Sequence[int]]]) -> dict:
    """How well a shortlist covers what should come out: the figure k and N are chosen by.

    Args:
        shortlist: The lists to measure.
        pairs: ``(source ids, output ids)`` per sentence: a reference's target ids, or the
            full-vocabulary greedy output (:func:`translation_ids`, :func:`corpus_ids`).

    Returns:
        ``sentences``; ``tokens``; ``token_coverage``, the fraction of output tokens inside
        their sentence's candidate set (``always`` ∪ its source ids' candidates);
        ``sentence_coverage``, the fraction of sentences whose every token is inside (a
        restricted greedy decode can then equal the full one); ``mean_candidates`` and
        ``max_candidates``, the candidate set's size per sentence.
    """
    sentences = tokens = inside = whole = 0
    sizes = []
    for source, output in pairs:
        allowed = shortlist.allowed(source)
        hits = int(np.isin(np.asarray(output, np.int64), allowed).sum())
        sentences += 1
        tokens += len(output)
        inside += hits
        whole += hits == len(output)
        sizes.append(len(allowed))
    return {"sentences": sentences, "tokens": tokens, "token_coverage": inside / tokens if tokens else 1.0,
            "sentence_coverage": whole / sentences if sentences else 1.0,
            "mean_candidates": float(np.mean(sizes)) if sizes else 0.0,
            "max_candidates": int(max(sizes, default=0))}
