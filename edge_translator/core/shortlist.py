"""A bundle's vocabulary shortlist at run time: which output rows each sentence may need.

At batch 1 the output layer (vocabulary x d_model) is most of the bytes a decoder step
reads; a sentence needs a few thousand of its rows. ``export --shortlist`` stores, per
source piece, the target pieces a translation of it may need (``shortlist.bin``, built by
:mod:`edge_translator.toolchain.shortlist`), and splits the decoder at its final hidden
state so that the output layer can run on some rows only.

A batch computes the logits of the union of its rows' candidate sets, with weights gathered
once per batch (:class:`BatchOutputs`), and restricts each row to its own set: a sentence's
output never depends on its batch-mates (mozilla/translations#977), because each column of
the logits is computed alone (an integer dot product times its scales) whichever other
columns are computed beside it.

``shortlist.bin`` holds little-endian int32 arrays one after another, no header:

* ``always [A]``: ids always allowed (``</s>``, ``<unk>``, the most frequent target tokens),
  sorted, unique, never ``<pad>`` nor a ``>>lang<<`` token;
* ``offsets [V+1]``: the candidates of source id ``s`` are ``candidates[offsets[s]:offsets[s+1]]``;
* ``candidates [C]``: each slice sorted and unique, never ``<pad>``, a ``>>lang<<`` token or
  an id already in ``always``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import BundleError

SHORTLIST_FILE = "shortlist.bin"


@dataclass(frozen=True, eq=False)
class Shortlist:
    """The three arrays of ``shortlist.bin``."""

    always: np.ndarray
    """Ids always allowed, sorted (int32)."""
    offsets: np.ndarray
    """``[V + 1]`` start of each source id's candidates (int32)."""
    candidates: np.ndarray
    """Candidate target ids, one sorted slice per source id (int32)."""

    @property
    def vocab_size(self) -> int:
        """V, the joint vocabulary's size."""
        return len(self.offsets) - 1

    def candidates_of(self, source_id: int) -> np.ndarray:
        """The candidates of one source id (without ``always``)."""
        return self.candidates[self.offsets[source_id]:self.offsets[source_id + 1]]

    def allowed(self, source_ids: Iterable[int]) -> np.ndarray:
        """The sorted ids one sentence may produce: ``always`` ∪ its source ids' candidates (int64)."""
        ids = np.unique(np.asarray(list(source_ids), np.int64))
        ids = ids[(ids >= 0) & (ids < self.vocab_size)]
        parts = [self.candidates[self.offsets[s]:self.offsets[s + 1]] for s in ids]
        return np.union1d(self.always, np.concatenate(parts)).astype(np.int64) if parts else \
            self.always.astype(np.int64)


def read_shortlist(directory: str | Path, entry: dict) -> Shortlist:
    """Read ``shortlist.bin`` as ``bundle.json``'s ``shortlist`` entry describes it.

    Raises:
        BundleError: If the entry is incomplete or the file does not match it.
    """
    try:
        path = Path(directory) / entry["file"]
        a, v, c = int(entry["always"]), int(entry["vocab"]), int(entry["candidates"])
    except (KeyError, TypeError, ValueError):
        raise BundleError(f"{Path(directory) / 'bundle.json'}: the shortlist entry needs 'file', 'always', "
                          "'vocab' and 'candidates'; export the bundle again") from None
    data = np.fromfile(path, dtype="<i4").astype(np.int32)
    if len(data) != a + v + 1 + c:
        raise BundleError(f"{path} holds {len(data)} int32 values, but bundle.json's shortlist says "
                          f"{a} + {v + 1} + {c}; export the bundle again")
    offsets = data[a:a + v + 1]
    if offsets[0] != 0 or offsets[-1] != c or np.any(np.diff(offsets) < 0) or \
            (len(data) > 0 and (data.min(initial=0) < 0 or np.concatenate([data[:a], data[a + v + 1:]]).max(initial=0) >= v)):
        raise BundleError(f"{path} is not a valid shortlist (offsets or ids out of range); export the bundle again")
    return Shortlist(data[:a], offsets, data[a + v + 1:])


@dataclass(frozen=True, eq=False)
class OutputTable:
    """The output layer's weights as stored in ``weights.bin``, for gathering rows by id.

    ``weight`` is ``[V, d_model]`` (int8 codes with per-row ``scale``, or float32 with
    ``scale`` ``None``); ``bias`` is ``[V]`` float32, or ``None`` when the model has none.
    They are read-only views of the file mapped into memory: only the rows gathered are read.
    """

    weight: np.ndarray
    scale: np.ndarray | None
    bias: np.ndarray | None

    @classmethod
    def open(cls, weights_file: Path, entry: dict) -> OutputTable:
        """Map the tensors ``entry`` places in ``weights_file`` (``bundle.json``'s ``shortlist.output_layer``).

        Raises:
            BundleError: If the entry is incomplete or points past the file.
        """
        size = weights_file.stat().st_size

        def tensor(key: str) -> np.ndarray | None:
            spec = entry.get(key)
            if spec is None:
                return None
            try:
                dtype, shape, offset = np.dtype(spec["dtype"]), tuple(int(d) for d in spec["shape"]), int(spec["offset"])
            except (KeyError, TypeError, ValueError):
                raise BundleError(f"{weights_file.parent / 'bundle.json'}: shortlist.output_layer.{key} needs "
                                  "'dtype', 'shape' and 'offset'; export the bundle again") from None
            if offset < 0 or offset + int(np.prod(shape)) * dtype.itemsize > size:
                raise BundleError(f"{weights_file}: shortlist.output_layer.{key} points past the file's end; "
                                  "export the bundle again")
            return np.memmap(weights_file, dtype, "r", offset, shape)

        weight = tensor("weight")
        if weight is None or weight.ndim != 2:
            raise BundleError(f"{weights_file.parent / 'bundle.json'}: shortlist.output_layer needs a 2-d 'weight'; "
                              "export the bundle again")
        return cls(weight, tensor("scale"), tensor("bias"))

    @property
    def transposed(self) -> bool:
        """Whether the graph takes the gathered weight as ``[d_model, N]`` (int8 codes) rather than ``[N, d_model]``."""
        return self.weight.dtype == np.int8

    def gather(self, ids: np.ndarray) -> list[np.ndarray]:
        """The shortlist graph's weight inputs for these vocabulary ids, in :func:`.graphio.shortlist_io` order."""
        weight = np.take(self.weight, ids, axis=0)
        feeds = [np.ascontiguousarray(weight.T) if self.transposed else weight]
        if self.scale is not None:
            feeds.append(np.take(self.scale, ids))
        if self.bias is not None:
            feeds.append(np.take(self.bias, ids))
        return feeds


class BatchOutputs:
    """The output columns of one batch: the union of its rows' candidate sets, the weights
    of those rows of the output layer, and which columns each row may take.

    Rows leave (:meth:`keep`) and join (:meth:`admit`); the union only grows, so that a row's
    columns never move while it decodes. Sets are boolean masks over the vocabulary: a
    sentence's set is a few thousand ids, and sorting them for each row would cost more than
    a decoder step.
    """

    def __init__(self, shortlist: Shortlist, table: OutputTable, sources: Sequence[Sequence[int]],
                 required: Sequence[int] = (), banned: Sequence[int] = ()):
        """Gather the columns of these sources.

        Args:
            shortlist, table: The bundle's lists and output layer.
            sources: Each row's source ids.
            required: Ids every row may take whatever the lists say (``</s>``).
            banned: Ids no row may take (``<pad>``).
        """
        self.shortlist, self.table = shortlist, table
        base = np.zeros(shortlist.vocab_size, bool)
        base[shortlist.always] = True
        base[np.asarray(required, np.int64)] = True
        self._banned = np.asarray(banned, np.int64)
        base[self._banned] = False
        self._base = base
        masks = self._masks(sources)
        self.ids = np.flatnonzero(masks.any(axis=0))
        """The vocabulary id of each column, ascending (int64)."""
        self.allowed = masks[:, self.ids]
        """``[rows, columns]`` bool: the columns each row may take."""
        self.feeds = table.gather(self.ids)
        """The shortlist graph's weight inputs for :attr:`ids`."""
        self.version = 0
        """Counts the times :attr:`ids` grew (a bound projection binds the weights again)."""

    def _masks(self, sources: Sequence[Sequence[int]]) -> np.ndarray:
        """``[rows, V]``: each source's set (``always``, its pieces' candidates, ``required``, not ``banned``)."""
        lists = self.shortlist
        masks = np.repeat(self._base[None, :], len(sources), axis=0)
        for row, source in enumerate(sources):
            ids = np.asarray(source, np.int64)
            ids = ids[(ids >= 0) & (ids < lists.vocab_size)]
            parts = [lists.candidates[lists.offsets[s]:lists.offsets[s + 1]] for s in ids]
            if parts:
                masks[row, np.concatenate(parts)] = True
        masks[:, self._banned] = False
        return masks

    @property
    def width(self) -> int:
        """Columns of the logits."""
        return len(self.ids)

    def keep(self, slots: np.ndarray) -> None:
        """Keep only these rows, in this order (as the batch keeps its rows)."""
        self.allowed = self.allowed[slots]

    def admit(self, sources: Sequence[Sequence[int]]) -> None:
        """Add rows after the current ones; the union grows if they need columns it lacks
        (the weights are gathered anew, the rows held keep their columns' values)."""
        masks = self._masks(sources)
        held = np.zeros(self.shortlist.vocab_size, bool)
        held[self.ids] = True
        if not np.all(held[masks.any(axis=0)]):
            union = np.flatnonzero(held | masks.any(axis=0))
            wider = np.zeros((len(self.allowed), len(union)), bool)
            wider[:, np.searchsorted(union, self.ids)] = self.allowed
            self.ids, self.allowed = union, wider
            self.feeds = self.table.gather(union)
            self.version += 1
        self.allowed = np.concatenate([self.allowed, masks[:, self.ids]])

    def restrict(self, logits: np.ndarray) -> None:
        """Set each row's columns outside its own candidate set to -inf, in place (``[rows, columns]``)."""
        np.copyto(logits, -np.inf, where=~self.allowed[: len(logits)])

    def columns_of(self, ids: np.ndarray) -> np.ndarray:
        """The columns of these vocabulary ids (each one of :attr:`ids`)."""
        return np.searchsorted(self.ids, ids)
