"""Read the tensors of a PyTorch checkpoint (``pytorch_model.bin``) with numpy alone, safely.

``torch.save`` writes a zip: a pickle (``data.pkl``) that rebuilds each tensor from a
storage, and each storage's raw bytes (``data/<key>``). A pickle can name any callable, so
loading one from the internet can run anything. This reader's unpickler knows only the
handful of names that rebuilding tensors needs, each mapped to a numpy function of ours;
any other name (``os.system``, ``builtins.eval``, a class of some package) refuses the file
before it is called. No torch is imported.
"""

from __future__ import annotations

import collections
import io
import logging
import pickle
import zipfile
from pathlib import Path, PurePosixPath

import numpy as np

from ..core.errors import ExportError

logger = logging.getLogger(__name__)

#: torch's storage classes by name, and the numpy type of their elements.
STORAGE_TYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "BFloat16Storage": "bfloat16", "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
    "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
}


class _StorageType:
    """Stands for one of torch's storage classes in the pickle."""

    def __init__(self, name: str):
        self.name = name
        self.dtype = STORAGE_TYPES[name]


def _widen_bfloat16(raw: np.ndarray) -> np.ndarray:
    """bfloat16 bits (uint16) as float32: the same sign, exponent and top of the mantissa."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


def _rebuild_tensor(storage: np.ndarray, offset: int, size, stride, *_ignored) -> np.ndarray:
    """``torch._utils._rebuild_tensor_v2``: a view of the storage, copied into its own array."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if not size:
        return storage[offset].copy()
    needed = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if all(size) else offset
    if needed > storage.size:
        raise ValueError(f"a tensor reads past its storage ({needed} of {storage.size} elements)")
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape=size,
                                           strides=tuple(s * storage.itemsize for s in stride))
    return np.array(view, copy=True)


def _rebuild_parameter(data: np.ndarray, *_ignored) -> np.ndarray:
    """``torch._utils._rebuild_parameter``: a parameter is its tensor here."""
    return data


#: The only names the pickle may use, and what stands in for each.
ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    **{("torch", name): _StorageType(name) for name in STORAGE_TYPES},
}


class _Refused(Exception):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class _Unpickler(pickle.Unpickler):
    """Resolves only :data:`ALLOWED` names; storages come from the zip's ``data/`` files."""

    def __init__(self, data: bytes, archive: zipfile.ZipFile, prefix: str):
        super().__init__(io.BytesIO(data))
        self.archive, self.prefix = archive, prefix
        self.storages: dict[str, np.ndarray] = {}

    def find_class(self, module: str, name: str):
        found = ALLOWED.get((module, name))
        if found is None:
            raise _Refused(f"{module}.{name}")
        return found

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType)):
            raise _Refused(f"persistent id {str(pid)[:60]}")
        kind, key, count = pid[1], str(pid[2]), int(pid[4])
        if key not in self.storages:
            raw = self.archive.read(f"{self.prefix}data/{key}")
            dtype = np.uint16 if kind.dtype == "bfloat16" else np.dtype(kind.dtype)
            array = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
            if array.size < count:
                raise ValueError(f"storage {key} holds {array.size} of its {count} elements")
            array = array[:count]
            self.storages[key] = _widen_bfloat16(array) if kind.dtype == "bfloat16" else array.astype(array.dtype.newbyteorder("="))
        return self.storages[key]


def read_torch_zip(path: str | Path) -> dict[str, np.ndarray]:
    """The tensors of a ``torch.save`` zip file, by name, as numpy arrays (bfloat16 widened to float32).

    Raises:
        ExportError: One line: not a zip checkpoint (the legacy format is refused too), a
            name the reader does not allow (it is named, and nothing of it ran), or a
            truncated or corrupt file.
    """
    path = Path(path)
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise ExportError(f"{path} does not exist") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise ExportError(f"{path} is not a zip checkpoint ({exc}): only PyTorch's zip format (torch.save since "
                          "1.6) is read; convert it to safetensors, or save it again with a current PyTorch") from None
    with archive:
        pickles = [n for n in archive.namelist() if PurePosixPath(n).name == "data.pkl"]
        if len(pickles) != 1:
            raise ExportError(f"{path} holds {len(pickles)} data.pkl files; it is not a PyTorch checkpoint")
        prefix = pickles[0][: -len("data.pkl")]
        byteorder = f"{prefix}byteorder"
        if byteorder in archive.namelist() and archive.read(byteorder).strip() not in (b"little", b""):
            raise ExportError(f"{path} was saved on a big-endian machine; save it again on this one")
        try:
            unpickler = _Unpickler(archive.read(pickles[0]), archive, prefix)
            state = unpickler.load()
        except _Refused as exc:
            raise ExportError(f"{path} holds a pickle that refers to {exc.name}; refusing to load it (only tensors "
                              "are allowed, and nothing in it was run): get the model as safetensors") from None
        except (zipfile.BadZipFile, KeyError, EOFError, ValueError, TypeError, pickle.UnpicklingError, OSError,
                AttributeError, IndexError) as exc:
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise ExportError(f"{path} is truncated or corrupt ({reason}); download it again") from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, np.ndarray) for v in state.values()):
        raise ExportError(f"{path} does not hold a dictionary of tensors; it is not a model's state dict")
    logger.info("read %d tensors from %s", len(state), path)
    return dict(state)
