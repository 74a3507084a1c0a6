"""What this CPU offers the quantized kernels, and whether a bundle suits it.

Block-quantized bundles (``q8``, ``q4``) run ONNX Runtime's ``MatMulNBits`` with int8
compute. That is fast only where MLAS has an int8 dot-product kernel: AVX2 or later on
x86-64, the dot-product extension (``asimddp``) on aarch64. Elsewhere, a Raspberry Pi 4
(Cortex-A72) for one, 8-bit weights are dequantized whole at every call, and the
per-channel ``int8`` bundle is the better choice. Features come from ``/proc/cpuinfo`` on
Linux (or the file ``EDGE_TRANSLATOR_CPUINFO`` names, for containers that hide it and for
tests), and on aarch64 Linux from the kernel's ``AT_HWCAP`` word when that file does not
list them; Apple silicon always has the dot-product extension; on other systems they
are unknown and nothing is assumed.
"""

from __future__ import annotations

import logging
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

#: ``/proc/cpuinfo`` flags that give MatMulNBits an int8 dot-product kernel, by architecture.
INT8_KERNEL_FLAGS = {"x86_64": ("avx2",), "aarch64": ("asimddp",)}
#: Flags worth naming in benchmark reports.
REPORTED_PREFIXES = ("avx", "amx", "asimd", "sve", "i8mm")
#: x86 flags of a u8s8 kernel that adds products into int32 without an int16 step (VNNI).
VNNI_FLAGS = ("avx512_vnni", "avx_vnni")
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "armv8": "aarch64"}


@dataclass(frozen=True)
class CpuInfo:
    """The processor, as far as the runtime needs to know it."""

    arch: str
    """``"x86_64"``, ``"aarch64"`` or what the platform reports."""
    name: str
    """Model name, e.g. ``"Intel(R) Xeon(R) Processor"``, or the architecture when unknown."""
    flags: frozenset[str] | None
    """Feature flags as ``/proc/cpuinfo`` spells them; ``None`` when they cannot be read."""

    def int8_kernel(self) -> bool | None:
        """Whether MatMulNBits has an int8 dot-product kernel here; ``None`` when unknown."""
        wanted = INT8_KERNEL_FLAGS.get(self.arch)
        if wanted is None or self.flags is None:
            return None
        return all(flag in self.flags for flag in wanted)

    def saturates_u8s8(self) -> bool | None:
        """Whether ONNX Runtime's u8s8 GEMM adds pairs of products into a saturating int16
        here (x86 without VNNI: ``vpmaddubsw``); ``None`` when unknown (other architectures
        too)."""
        if self.arch != "x86_64" or self.flags is None:
            return None
        return not any(flag in self.flags for flag in VNNI_FLAGS)

    def reported_flags(self) -> list[str]:
        """The SIMD flags benchmarks name (AVX, AMX, ASIMD, SVE, i8mm)."""
        return sorted(f for f in (self.flags or ()) if f.startswith(REPORTED_PREFIXES))


def normalize_arch(machine: str) -> str:
    """``platform.machine()`` spelled the way bundles name architectures."""
    machine = machine.lower()
    return _ARCH_ALIASES.get(machine, machine)


#: The ``/proc/cpuinfo`` key that lists features, by architecture.
_FLAGS_KEY = {"x86_64": "flags", "aarch64": "features"}
#: ``AT_HWCAP`` (``/proc/self/auxv``) bits of aarch64 features: the kernel's ``HWCAP_*``.
_AARCH64_HWCAP = {"asimd": 1 << 1, "asimddp": 1 << 20}
_AT_HWCAP = 16


def parse_cpuinfo(text: str, arch: str) -> CpuInfo:
    """Read the first processor's name and flags from ``/proc/cpuinfo`` text.

    x86 kernels list ``flags`` and ``model name``; aarch64 kernels list ``Features`` and,
    at most, ``CPU part`` numbers (``Model`` on a Raspberry Pi names the board). A feature
    list under the other architecture's key (qemu user emulation shows the host's file)
    says nothing about this CPU, so the flags are then unknown.
    """
    name, board, listed = "", "", None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key in ("flags", "features") and listed is None:
            listed = (key, frozenset(value.split()))
        elif key == "model name" and not name:
            name = value
        elif key == "model" and not board and not value.isdigit():
            board = value
    wanted = _FLAGS_KEY.get(arch)
    flags = listed[1] if listed and wanted in (None, listed[0]) else None
    if listed and flags is None:  # the other architecture's file: its name is not this CPU's either
        name = ""
    return CpuInfo(arch, name or board or arch, flags)


def aarch64_hwcap_flags(auxv: str | Path = "/proc/self/auxv") -> frozenset[str] | None:
    """aarch64 features from the kernel's ``AT_HWCAP`` word, which emulators fill in too."""
    import struct

    try:
        data = Path(auxv).read_bytes()
    except OSError:
        return None
    for key, value in struct.iter_unpack("<QQ", data[: len(data) // 16 * 16]):
        if key == _AT_HWCAP:
            return frozenset(name for name, bit in _AARCH64_HWCAP.items() if value & bit)
    return None


def cpu_info(cpuinfo: str | Path | None = None, machine: str | None = None) -> CpuInfo:
    """Describe this CPU.

    Args:
        cpuinfo: Where Linux lists the CPU's features; defaults to ``EDGE_TRANSLATOR_CPUINFO``
            or ``/proc/cpuinfo``.
        machine: The architecture; defaults to ``platform.machine()``.
    """
    arch = normalize_arch(machine or platform.machine())
    cpuinfo = cpuinfo or os.environ.get("EDGE_TRANSLATOR_CPUINFO") or "/proc/cpuinfo"
    info = None
    try:
        info = parse_cpuinfo(Path(cpuinfo).read_text(encoding="utf-8", errors="replace"), arch)
    except OSError:
        pass
    native = normalize_arch(platform.machine()) == arch == "aarch64"
    if native and sys.platform == "linux" and (info is None or info.flags is None):
        hwcap = aarch64_hwcap_flags()
        if hwcap is not None:
            return CpuInfo(arch, info.name if info else arch, hwcap)
    if info is not None:
        return info
    if sys.platform == "darwin" and arch == "aarch64":
        return CpuInfo(arch, "Apple silicon", frozenset({"asimd", "asimddp"}))
    return CpuInfo(arch, platform.processor() or arch, None)


def cpu_name() -> str:
    """The CPU's model name, for figures that depend on it."""
    return cpu_info().name


def slow_path_warning(quantization: dict, cpu: CpuInfo) -> str | None:
    """One line saying a block-quantized bundle will be slow on this CPU, or ``None``.

    Args:
        quantization: The bundle's ``quantization`` block.
        cpu: The CPU to judge for.
    """
    mode = quantization.get("mode")
    if mode not in ("q8", "q4") or cpu.int8_kernel() is not False:
        return None
    needed = " or ".join(INT8_KERNEL_FLAGS[cpu.arch])
    return (f"this {mode} bundle needs an int8 dot-product CPU ({needed}); {cpu.name} has none, so ONNX Runtime "
            f"falls back to slow float kernels: export with --quantize int8r for this machine")


def saturation_warning(manifest: dict, cpu: CpuInfo, where: str = "") -> str | None:
    """One line saying an int8r bundle exported before the 64-step codes computes wrongly
    here, or ``None``.

    Such bundles quantize activations to codes up to 255; on a CPU whose u8s8 kernel sums
    pairs of products in int16 (:meth:`CpuInfo.saturates_u8s8`), some sums overflow.

    Args:
        manifest: The bundle's ``bundle.json``.
        cpu: The CPU to judge for.
        where: The bundle directory, named in the fix.
    """
    quantization = manifest.get("quantization") or {}
    if quantization.get("mode") != "rowwise" or quantization.get("activation_code_peak") == 64:
        return None
    if not cpu.saturates_u8s8():
        return None
    return (f"this int8r bundle was exported before edge-translator's 64-step activation codes, and {cpu.name} "
            "has no VNNI, so some of its integer sums saturate and translations can be wrong: run "
            f"`edge-translator upgrade {where or 'BUNDLE'}` once (offline, the weights are kept)")


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
        if digits != piece:
            break
    return tuple(parts)


def check_runtime(manifest: dict, cpu: CpuInfo | None = None, onnxruntime_version: str | None = None,
                  where: str = "") -> str | None:
    """Refuse a bundle this ONNX Runtime cannot run; return a slow-path or saturation
    warning, if any.

    Args:
        manifest: The bundle's ``bundle.json``.
        cpu: This CPU (read when not given).
        onnxruntime_version: The installed ONNX Runtime (asked when not given).
        where: The bundle directory, for the warning's fix.

    Returns:
        One line to warn with, or ``None``.

    Raises:
        BundleError: When the bundle needs a newer ONNX Runtime on this architecture.
    """
    from .errors import BundleError

    quantization = manifest.get("quantization") or {}
    needs = (manifest.get("runtime") or {}).get("onnxruntime") or {}
    if quantization.get("mode") not in ("q8", "q4", "rowwise") and not needs:
        return None
    cpu = cpu or cpu_info()
    minimum = needs.get(cpu.arch)
    if minimum and onnxruntime_version is None:
        from .sessions import onnxruntime

        onnxruntime_version = onnxruntime().__version__
    if minimum and _version(onnxruntime_version) < _version(minimum):
        raise BundleError(f"this {quantization.get('mode')} bundle needs onnxruntime >= {minimum} on {cpu.arch}, "
                          f"this is {onnxruntime_version}: pip install -U 'onnxruntime>={minimum}', or use an int8 "
                          "bundle")
    return slow_path_warning(quantization, cpu) or saturation_warning(manifest, cpu, where)
