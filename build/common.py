"""What the two PyInstaller specs share: what must stay out, what may, and the stripping.

Imported by ``edge-translator.spec`` and ``edge-translator-gui.spec`` (PyInstaller runs a
spec with ``SPECPATH`` set; the specs put this folder on ``sys.path``). ``build.sh``
checks the built apps against :data:`FORBIDDEN` again, by listing their archives.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

#: Never in an app: the export toolchain and what it needs, the benchmarks (which need
#: the toolchain), and Ray with pyarrow (a cluster job runs from the Python package: the
#: extra "ray"). build.sh fails if any is inside.
FORBIDDEN = ["torch", "transformers", "onnx", "edge_translator.toolchain", "edge_translator.bench", "ray", "pyarrow"]

#: Left out of both apps because nothing they run imports it. Each group says why.
EXCLUDES = FORBIDDEN + [
    # other tools of the project's extras
    "tkinter", "_tkinter", "matplotlib", "sacrebleu", "ctranslate2", "huggingface_hub",
    "safetensors", "opencc", "pytest", "IPython", "setuptools", "pkg_resources",
    # onnxruntime's Python tooling (quantizer, transformer optimizers) imports onnx/torch
    "onnxruntime.quantization", "onnxruntime.transformers", "onnxruntime.tools",
    "onnxruntime.backend", "onnxruntime.datasets",
    # python-docx needs lxml.etree only; sentencepiece's protobuf model readers are unused
    "lxml.objectify", "lxml.html", "lxml.isoschematron", "lxml.cssselect", "lxml.sax",
    "google.protobuf", "sentencepiece.sentencepiece_pb2", "sentencepiece.sentencepiece_model_pb2",
    # numpy's subpackages that `import numpy` loads only on first use, and the runtime never
    # uses (about 1.3 MB compressed)
    "numpy.random", "numpy.fft", "numpy.polynomial", "numpy.ma", "numpy.f2py", "numpy.testing",
    "numpy.distutils",
    # East Asian legacy codecs: documents are read as UTF-8 or UTF-16 only (documents/textio)
    "_codecs_cn", "_codecs_hk", "_codecs_iso2022", "_codecs_jp", "_codecs_kr", "_codecs_tw",
    "_multibytecodec",
    # interactive and developer modules of the standard library
    "pydoc", "doctest", "unittest", "readline", "pdb",
]


def stripped(binaries, folder):
    """The interpreter's own libraries copied without debug symbols (a pyenv build keeps
    them: about 10 MB). Wheels' libraries are already stripped, and stripping the
    auditwheel-patched ones (numpy.libs) breaks them, so PyInstaller's ``strip=True`` is
    not used. A ``strip`` that cannot read a file (another architecture's) leaves it as is.

    Args:
        binaries: PyInstaller's TOC entries ``(dest, src, kind)``.
        folder: Where the stripped copies go (the spec's ``workpath``).

    Returns:
        The entries, with ``src`` pointing at a stripped copy where one was made.
    """
    out = []
    for dest, src, kind in binaries:
        if "site-packages" not in src and shutil.which("strip"):
            target = Path(folder) / "stripped" / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            if subprocess.run(["strip", "-o", str(target), src], capture_output=True).returncode == 0:
                src = str(target)
        out.append((dest, src, kind))
    return out
