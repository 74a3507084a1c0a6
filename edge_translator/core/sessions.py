"""ONNX Runtime, set up in one place: the import (telemetry off), threads, optimization,
provider, logs.

ONNX Runtime's official Linux and macOS packages carry telemetry since 1.2x: on its first
import it writes a persistent device id and an event cache under ``~/.cache/Microsoft/``
and queues events for upload. An offline translator must not, so every import of
``onnxruntime`` in this package goes through :func:`onnxruntime`, which sets
``ORT_DISABLE_TELEMETRY=1`` first: ONNX Runtime's own full opt-out, read once per process
(no uploader, no events, no device id, no cache). A user who sets the variable to ``0``
keeps ONNX Runtime's default.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .errors import BundleError

logger = logging.getLogger(__name__)

PROVIDERS = ["CPUExecutionProvider"]
#: ONNX Runtime's opt-out of its telemetry; it must be set before the first import.
TELEMETRY_VARIABLE = "ORT_DISABLE_TELEMETRY"


def onnxruntime():
    """The ``onnxruntime`` module, imported with its telemetry off (see the module's doc).

    Returns:
        The module. If it was imported before, by someone else, with telemetry on, it is
        too late for the full opt-out; its runtime switch is still turned off.
    """
    os.environ.setdefault(TELEMETRY_VARIABLE, "1")
    import onnxruntime as ort

    if os.environ.get(TELEMETRY_VARIABLE) == "1" and hasattr(ort, "disable_telemetry_events"):
        ort.disable_telemetry_events()
    return ort


def physical_cores() -> int:
    """Physical CPU cores available to this process (logical CPUs if unknown)."""
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available = os.cpu_count() or 1
    cores = set()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            physical = core = None
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "physical id":
                    physical = value.strip()
                elif key == "core id":
                    core = value.strip()
                elif not line.strip():
                    if core is not None:
                        cores.add((physical, core))
                    physical = core = None
    except OSError:
        pass
    return max(1, min(available, len(cores) or available))


def session_options(threads: int | None = None, spin: bool = True, arena: bool = True):
    """Options for every session of the runtime.

    Args:
        threads: Intra-op threads; ``None`` means the number of physical cores.
        spin: Let ONNX Runtime's threads spin between operators instead of sleeping:
            faster when the process does little else, slower when other threads need
            the cores at once. The daemon's sessions spin, all but the encoder's
            (:data:`.decode.ENCODER_SPINS`): with those spinning too, the daemon's HTTP
            threads lost more than spinning gained.
        arena: Keep ONNX Runtime's CPU memory arena, which holds on to the largest buffers
            any call needed (fastest). Without it every buffer comes from malloc.

    Returns:
        An ``onnxruntime.SessionOptions``.
    """
    ort = onnxruntime()
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or physical_cores()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if not spin:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.enable_cpu_mem_arena = arena
    return options


def create_session(path: Path, threads: int | None = None, spin: bool = True, arena: bool = True):
    """Open one graph on the CPU provider with :func:`session_options`.

    Raises:
        BundleError: If ONNX Runtime cannot load the graph.
    """
    ort = onnxruntime()
    options = session_options(threads, spin, arena)
    try:
        return ort.InferenceSession(str(path), sess_options=options, providers=PROVIDERS)
    except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated types
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BundleError(f"{path} could not be loaded by ONNX Runtime ({reason}); copy the bundle again "
                          "or re-export it") from None


#: glibc ``mallopt`` parameters: buffers this large go straight to mmap and back to the system
#: when freed (glibc otherwise raises the threshold after the first frees, and large buffers then
#: stay in the heap), and the heap's top is returned above this much free space.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
LEAN_MALLOC_BYTES = 128 * 1024


def lean_malloc() -> bool:
    """Fix glibc's mmap and trim thresholds for the whole process, so that large buffers
    freed (ONNX Runtime's, numpy's) go back to the system instead of staying in the heap.

    glibc raises its mmap threshold to the size of each large buffer freed (up to 32 MiB), so
    after the first frees such buffers come from the heap, where pieces of every size then
    keep it from shrinking. A long-running process calls this once; ``memory="steady"``
    (:meth:`.decode.Seq2Seq.load`) does.

    Returns:
        ``False`` where there is no glibc (nothing changed), else ``True``.
    """
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, LEAN_MALLOC_BYTES) and mallopt(M_TRIM_THRESHOLD, LEAN_MALLOC_BYTES))
