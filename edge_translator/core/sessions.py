"""ONNX Runtime session options, set in one place: threads, optimization, provider, logs."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .errors import BundleError

logger = logging.getLogger(__name__)

PROVIDERS = ["CPUExecutionProvider"]


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
            faster when the process does nothing else, slower when other threads need
            the cores (the daemon's HTTP threads: on 2 cores its throughput rose a third
            without spinning).
        arena: Keep ONNX Runtime's CPU memory arena, which holds on to the largest buffers
            any call needed (fastest). Without it every buffer comes from malloc.

    Returns:
        An ``onnxruntime.SessionOptions``.
    """
    import onnxruntime as ort

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
    import onnxruntime as ort

    options = session_options(threads, spin, arena)
    try:
        return ort.InferenceSession(str(path), sess_options=options, providers=PROVIDERS)
    except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated types
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BundleError(f"{path} could not be loaded by ONNX Runtime ({reason}); copy the bundle again "
                          "or re-export it") from None
