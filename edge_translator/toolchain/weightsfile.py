"""The bundle's one external-data file: every weight of both graphs stored once.

Both graphs point into one ``weights.bin``; :class:`SharedWeights` writes each tensor's
bytes there once, however many initializers (or graphs) hold the same bytes, and
:func:`tensor_proto` keeps small tensors inline in the graph instead.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

#: Tensors at least this large go to the shared weights file; smaller ones stay inline.
EXTERNAL_MIN_BYTES = 1024
ALIGN_LARGE = 4096
ALIGN_SMALL = 64


class SharedWeights:
    """Writes tensors into one external-data file, storing identical bytes once."""

    def __init__(self, path: Path):
        self.path = path
        self._handle = open(path, "wb")
        self._offsets: dict[str, int] = {}
        self.stored = 0
        self.referenced = 0

    def add(self, array: np.ndarray) -> tuple[int, int]:
        """Store an array (or find its twin) and return ``(offset, length)``."""
        data = np.ascontiguousarray(array).tobytes()
        self.referenced += len(data)
        key = hashlib.sha256(data).hexdigest()
        if key not in self._offsets:
            align = ALIGN_LARGE if len(data) >= ALIGN_LARGE * 16 else ALIGN_SMALL
            position = self._handle.tell()
            padding = (-position) % align
            self._handle.write(b"\0" * padding)
            self._offsets[key] = position + padding
            self._handle.write(data)
            self.stored += len(data)
        return self._offsets[key], len(data)

    def close(self) -> None:
        """Flush and close the file."""
        self._handle.close()


def tensor_proto(name: str, array: np.ndarray, shared: SharedWeights, weights_file: str):
    """An initializer: inline if small, else a reference into the shared weights file."""
    from onnx import TensorProto, helper, numpy_helper

    if array.nbytes < EXTERNAL_MIN_BYTES:
        return numpy_helper.from_array(array, name)
    offset, length = shared.add(array)
    tensor = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype))
    tensor.dims.extend(array.shape)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", weights_file), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def save_shared(models: dict, out: Path, weights_file: str = "weights.bin") -> tuple[dict[str, Path], SharedWeights]:
    """Write ONNX models (name → ModelProto with data loaded) into ``out`` sharing one weights file."""
    import onnx
    from onnx import numpy_helper

    shared = SharedWeights(out / weights_file)
    files = {}
    try:
        for name, model in models.items():
            tensors = [tensor_proto(t.name, numpy_helper.to_array(t), shared, weights_file)
                       for t in model.graph.initializer]
            del model.graph.initializer[:]
            model.graph.initializer.extend(tensors)
            path = out / f"{name}.onnx"
            onnx.save_model(model, str(path))
            files[name] = path
    finally:
        shared.close()
    return files, shared
