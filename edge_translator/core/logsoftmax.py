"""Each decoder step's log-softmax, run by ONNX Runtime instead of numpy.

A greedy step needs the log-probability of the token it chooses, so the whole row of
logits must be normalised (a log-sum-exp over 65,001 values for opus-mt-en-zh). numpy does
that on one thread with a slow ``exp``, a large share of a step at many rows; ONNX
Runtime's ``LogSoftmax`` kernel is vectorised. It runs on one thread, the caller's: a
second thread pool beside the decoder's, whose threads spin between calls, would fight
the decoder for the cores (docs/benchmarks.md). The graph is one node, so it is kept here as bytes
(``tests/test_logsoftmax.py`` rebuilds it with the ``onnx`` package and compares), which
works for every bundle, old ones too, and needs nothing beyond ONNX Runtime.
"""

from __future__ import annotations

from .sessions import PROVIDERS, onnxruntime, session_options

#: Input and output names of :data:`GRAPH`.
INPUT, OUTPUT = "logits", "log_probs"

#: ONNX model (IR 8, opset 13): ``log_probs = LogSoftmax(logits, axis=-1)`` over
#: float32 ``[rows, new_length, vocab]`` of any size.
GRAPH = bytes.fromhex(
    "0808120f656467652d7472616e736c61746f723ab6010a420a066c6f6769747312096c6f675f70726f62731a0b6c6f"
    "675f736f66746d6178220a4c6f67536f66746d61782a140a046178697318ffffffffffffffffff01a00102120b6c6f"
    "675f736f66746d61785a2f0a066c6f6769747312250a230801121f0a061204726f77730a0c120a6e65775f6c656e67"
    "74680a071205766f63616262320a096c6f675f70726f627312250a230801121f0a061204726f77730a0c120a6e6577"
    "5f6c656e6774680a071205766f63616242040a00100d"
)


def open_log_softmax(spin: bool = True, arena: bool = True):
    """An ONNX Runtime session of :data:`GRAPH` on the calling thread alone (see above).

    Args:
        spin, arena: As for :func:`.sessions.session_options`; the decoder's own.
    """
    ort = onnxruntime()
    return ort.InferenceSession(GRAPH, sess_options=session_options(1, spin, arena), providers=PROVIDERS)
