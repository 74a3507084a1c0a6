"""Blocks of a corpus job on a Ray cluster, through Ray Data.

The driver sends the blocks not yet committed as a dataset (in waves of at most
``wave_rows`` rows, so it never holds a huge corpus's text at once); ``map_batches`` runs them
through a fixed pool of actors, each holding one :class:`~edge_translator.core.translator.Translator`
with as many threads as the CPUs it reserves, and the finished blocks stream back to the
driver, which commits them. Rows travel through Ray's object store, so the nodes need no
shared storage: only edge-translator and the model (the embedded one, or an installed
model of the same name on every node; an actor whose model differs from the driver's
refuses to start).

When a node dies, Ray Data restarts its actor elsewhere and retries its block; if the pool
cannot be made whole again, the run stops with an error and the blocks still missing are
sent again, to a pool sized to the CPUs left. A block is committed once: a retried block
that comes back twice is dropped by the driver.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..core.errors import EdgeTranslatorError, require
from ..core.translator import TranslateOptions
from .blocks import BlockCounts
from .corpus import Block, BlockResult

logger = logging.getLogger(__name__)


def connect(address: str | None):
    """Join the cluster at ``address`` (``"auto"``: the one ``ray start`` began on this machine;
    ``None``: ``$RAY_ADDRESS``, else a new cluster of this machine alone); a driver already
    connected stays so. Returns the ``ray`` module.

    Raises:
        MissingDependencyError: Without the extra ``ray``.
        ValueError: If nothing answers at a HOST:PORT address.
        EdgeTranslatorError: If the cluster cannot be joined.
    """
    ray = require("ray", "ray")
    require("ray.data", "ray")
    if not ray.is_initialized():
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # an offline tool reports nothing
        address = address or os.environ.get("RAY_ADDRESS") or "local"
        _probe(address)
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False,
                     configure_logging=False, include_dashboard=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise EdgeTranslatorError(f"cannot reach the Ray cluster at {address} "
                                      f"({str(exc).splitlines()[0]}); start it with `ray start --head` and pass "
                                      "--ray HOST:6379") from None
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the job draws its own
    context.enable_operator_progress_bars = False
    # what costs CPU on the driver's node and serves only Ray's dashboards
    context.enable_get_object_locations_for_metrics = False
    context.enable_auto_log_stats = False
    if not logger.isEnabledFor(logging.INFO):
        logging.getLogger("ray.data").setLevel(logging.WARNING)
    return ray


def _probe(address: str) -> None:
    """Fail at once, in one line, when a HOST:PORT cluster does not answer (Ray itself
    retries for minutes before it gives up)."""
    import socket

    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return  # "auto", "local", a ray:// client address: Ray finds or starts them
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ValueError(f"no Ray cluster answers at {address} ({exc.strerror or exc}); start it with "
                         "`ray start --head --port=6379` on that machine, or check --ray") from None


def cluster_cpus(ray) -> int:
    """The CPUs of the nodes that are alive now."""
    return int(sum(node["Resources"].get("CPU", 0) for node in ray.nodes() if node.get("Alive")))


def with_retries(ray, missing: dict, run_once, attempts: int, what: str) -> Iterator:
    """``run_once(items)`` over the items still ``missing`` until each has come back once.

    ``run_once`` yields ``(key, result)``; a key that comes back twice (a retried task whose
    first answer arrived after all) is dropped. A lost node stops a run with a Ray error: the
    items still missing are sent again, at most ``attempts`` runs in all.

    Raises:
        EdgeTranslatorError: When ``attempts`` runs were not enough (or what ``run_once`` raises).
    """
    error = None
    for _ in range(attempts):
        if not missing:
            return
        try:
            for key, result in run_once(ray, list(missing.values())):
                if missing.pop(key, None) is not None:
                    yield key, result
        except (ray.exceptions.RayError, RuntimeError) as exc:
            error = exc
            logger.warning("the cluster lost work (%s); sending the %d %s still missing again",
                           str(exc).splitlines()[0] if str(exc) else type(exc).__name__, len(missing), what)
    if missing:
        reason = str(error).splitlines()[0] if error is not None and str(error) else type(error).__name__
        raise EdgeTranslatorError(f"the cluster failed {attempts} times ({reason}); {len(missing)} {what} are "
                                  "missing: run the job again to resume")


def open_snapshot(snapshot: bytes | None, prefix: str):
    """The translation memory snapshot an actor was sent, as a file of its own (``None``: none)."""
    if not snapshot:
        return None
    from ..core.memory import TranslationMemory

    folder = Path(tempfile.mkdtemp(prefix=prefix))
    (folder / "memory.sqlite").write_bytes(snapshot)
    return TranslationMemory(folder / "memory.sqlite")


def load_on_node(model: str | None, threads: int, cache, model_id: str):
    """An actor's translator, or the error it must answer every call with: no such model on
    this node, or a model other than the driver's. Ray Data hands the driver only its own
    message for an exception raised in an actor, so an actor sends its errors back as a
    column of its output (``error``), which the driver raises.

    Returns:
        ``(translator, None)`` or ``(None, error)``.
    """
    from ..core.translator import Translator

    try:
        translator = Translator.load(model, threads=threads, cache=cache, memory="steady")
    except EdgeTranslatorError as exc:
        return None, exc
    if translator.model_id == model_id:
        return translator, None
    import socket

    translator.close()
    return None, EdgeTranslatorError(f"the model on {socket.gethostname()} is {translator.model_id}, the driver's "
                                     f"is {model_id}; install the same model on every node")


class _BlockActor:
    """One Ray actor: loads the model once, then translates the blocks it is given."""

    def __init__(self, model: str | None, threads: int, options: TranslateOptions, model_id: str,
                 snapshot: bytes | None):
        from ..core.cache import ChainedCache, LRUCache
        from .blocks import BlockTranslator

        memory = open_snapshot(snapshot, "edge-corpus-tm-")
        cache = ChainedCache(LRUCache(), *([memory] if memory is not None else []))
        self.translator, self.refusal = load_on_node(model, threads, cache, model_id)
        self.blocks = BlockTranslator(self.translator, options) if self.translator is not None else None

    def __call__(self, batch: dict) -> dict:
        out: dict[str, list] = {"key": [], "index": [], "rows": [], "decoded": [], "reused": [], "pairs": [],
                                "error": []}
        # Two calls run at once in one actor (see RayRunner._one_run): each block sends back
        # the pairs its own submission decoded, never what the other call put in the cache.
        for key, index, texts in zip(batch["key"], batch["index"], batch["texts"]):
            rows, counts, pairs, error = [], BlockCounts(), [], str(self.refusal or "")
            if not error:
                try:
                    rows, counts, pairs = self.blocks.collect(self.blocks.submit(json.loads(texts)))
                except EdgeTranslatorError as exc:
                    error = str(exc)
            out["key"].append(key)
            out["index"].append(int(index))
            out["rows"].append(json.dumps(rows, ensure_ascii=False))
            out["decoded"].append(counts.decoded)
            out["reused"].append(counts.reused)
            out["pairs"].append(pickle.dumps(pairs))
            out["error"].append(error)
        return out


class RayRunner:
    """Blocks through a fixed pool of Ray Data actors."""

    def __init__(self, address: str | None, model: str | None, options: TranslateOptions, model_id: str,
                 cpus_per_actor: int = 1, actors: int | None = None, snapshot: bytes | None = None,
                 attempts: int = 3, wave_rows: int = 500_000):
        """Args:
            address: The cluster (see :func:`connect`).
            model: The model every actor loads: a bundle path that exists on every node, an
                installed model's name, or ``None`` for the embedded one.
            options: Target and decoding options.
            model_id: The driver's model checksum; an actor whose model differs stops.
            cpus_per_actor: CPUs each actor reserves, and its translator's threads.
            actors: The pool's size (default: the cluster's CPUs over ``cpus_per_actor``).
            snapshot: A translation memory file's bytes, for every actor to read.
            attempts: Runs over the blocks still missing before the job gives up.
            wave_rows: Rows sent as one dataset (the pool starts again for each wave).
        """
        if cpus_per_actor < 1:
            raise ValueError(f"cpus_per_actor must be at least 1, not {cpus_per_actor}")
        if actors is not None and actors < 1:
            raise ValueError(f"actors must be at least 1, not {actors}")
        self.address, self.model, self.options, self.model_id = address, model, options, model_id
        self.cpus, self.actors, self.snapshot, self.attempts = cpus_per_actor, actors, snapshot, attempts
        self.wave_rows = wave_rows

    def run(self, blocks: Iterator[Block]) -> Iterator[BlockResult]:
        ray = connect(self.address)
        blocks = iter(blocks)
        while True:  # in waves, so the driver holds at most wave_rows rows of text
            missing, rows = {}, 0
            for block in blocks:
                missing[(block.key, block.index)] = block
                rows += len(block.texts)
                if rows >= self.wave_rows:
                    break
            if not missing:
                return
            for _, result in with_retries(ray, missing, self._one_run, self.attempts, "blocks"):
                yield result

    def _pool(self, ray) -> int:
        if self.actors is not None:
            return self.actors
        cpus = cluster_cpus(ray)
        if cpus < self.cpus:
            raise EdgeTranslatorError(f"the cluster has {cpus} CPUs, fewer than the {self.cpus} an actor needs; "
                                      "lower --ray-cpus or add nodes")
        return cpus // self.cpus

    def _one_run(self, ray, blocks: list[Block]) -> Iterator[tuple[tuple[str, int], BlockResult]]:
        data = ray.data
        items = [{"key": b.key, "index": b.index, "texts": json.dumps(b.texts, ensure_ascii=False)} for b in blocks]
        size = min(self._pool(ray), len(items))
        dataset = data.from_items(items, override_num_blocks=len(items)).map_batches(
            # two calls at once per actor, sharing its engine: the next block is queued while
            # this one's last batches decode, so a block's tail never leaves the engine idle
            _BlockActor, batch_size=1, compute=data.ActorPoolStrategy(
                size=size, max_concurrent_calls_per_actor=2, enable_true_multi_threading=True),
            num_cpus=self.cpus,
            fn_constructor_kwargs={"model": self.model, "threads": self.cpus, "options": self.options,
                                   "model_id": self.model_id, "snapshot": self.snapshot},
            batch_format="default")
        for row in dataset.iter_rows():
            if row["error"]:
                raise EdgeTranslatorError(str(row["error"]))
            rows = [tuple(r) for r in json.loads(row["rows"])]
            result = BlockResult(str(row["key"]), int(row["index"]), rows,
                                 BlockCounts(int(row["decoded"]), int(row["reused"])), pickle.loads(row["pairs"]))
            yield (result.key, result.index), result
