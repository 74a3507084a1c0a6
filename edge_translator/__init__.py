"""edge-translator: offline English→Chinese translation on a small ONNX Runtime core."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["Translator", "TranslateOptions", "SentenceResult", "Priority", "EngineOptions", "split_sentences",
           "__version__"]


def __getattr__(name: str):
    # Lazy, so that importing the package loads nothing heavy.
    if name in ("Translator", "TranslateOptions", "SentenceResult"):
        from .core import translator

        return getattr(translator, name)
    if name in ("Priority", "EngineOptions"):
        from .core import engine

        return getattr(engine, name)
    if name == "split_sentences":
        from .core.text import split_sentences

        return split_sentences
    raise AttributeError(f"module 'edge_translator' has no attribute {name!r}")
