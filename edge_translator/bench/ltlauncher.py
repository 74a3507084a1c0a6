"""LibreTranslate's start-up inside its own venv, with the patches that let it run an
opus-mt-shaped argos package offline; run by path, never imported by LibreTranslate.

``bench-serve --libretranslate`` runs ``<LibreTranslate venv>/bin/python ltlauncher.py
--segmenter .../core/text.py [--match-length N] -- <libretranslate flags>``. This file
imports nothing of edge_translator (that venv has another numpy and none of our
dependencies): the segmenter is loaded from its file, which is pure Python. Everything
is monkeypatched in memory at start-up; LibreTranslate's installed files are not touched.
The patches, each with its reason, are listed in :data:`PATCHES`, which the report quotes.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import sys

#: What :func:`apply_patches` changes in argos/LibreTranslate and why (quoted in the report).
PATCHES = {
    "segmenter": "Sentence splitting: argos's default MiniSBD sentencizer downloads its ONNX model at the first "
                 "request (and an offline machine answers that request with an error), so argos is given "
                 "edge-translator's own segmenter (`edge_translator.core.text.split_sentences`, pure Python, "
                 "loaded from its file) behind argos's one-method sentencizer interface.",
    "opus_mt_tokens": "Tokens: argos encodes the source with one `sentencepiece.model` and decodes the output with "
                      "the same model. An opus-mt-shaped (Marian) model needs the target-language token "
                      "(`>>cmn_Hans<<`) before the source pieces and `</s>` after them, and its output decoded "
                      "with the *target* SentencePiece model; the package's `metadata.json` names both "
                      "(`opus_mt`), and its packages get a tokenizer that does this.",
    "offline": "Offline: with fewer than two packages installed, LibreTranslate's boot fetches the argos package "
               "index and MiniSBD's models; those two calls are refused at once (boot reports 'normal if "
               "you're offline' and goes on), and any other connection to a host other than loopback is refused "
               "and counted on stderr.",
}
#: The decoding-length patches (``--length``), quoted in the report for the one used.
LENGTH_PATCHES = {
    "cap": "Length limit: argos lets CTranslate2 decode up to 256 tokens, where edge-translator stops at 2 × "
           "source tokens + 10 (at most the model's positions); on prose the demo model sometimes loops, and "
           "LibreTranslate then decoded several times the tokens of the daemon for the same request. CTranslate2's "
           "`max_decoding_length` is set to the daemon's limit (the longest of a request's sentences), so both "
           "stop at the same length. The daemon also stops a loop early (its repetition guard), which "
           "LibreTranslate has no equivalent of; the report gives both sides' mean output length.",
    "exact": "Equal output lengths (random models): CTranslate2 decodes exactly the daemon's length limit "
             "(2 × source tokens + 10, at most the model's positions) through `min_decoding_length` = "
             "`max_decoding_length`, sentence by sentence, so that it never stops early on an end of sentence "
             "that a random model emits at random.",
}
READY_LINE = "edge-bench: patches applied:"
REFUSED_LINE = "edge-bench: refused connection to"


def load_segmenter(path: str):
    """``split_sentences`` from edge-translator's ``core/text.py``, loaded as a lone module."""
    spec = importlib.util.spec_from_file_location("edge_translator_text", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.split_sentences


def refuse_remote_connections() -> None:
    """Make every socket connection to a host other than loopback fail at once, and say so."""
    original = socket.socket.connect

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and self.family != socket.AF_UNIX:
            print(f"{REFUSED_LINE} {address}", file=sys.stderr, flush=True)
            raise OSError(f"edge-bench: offline (no connection to {address})")
        return original(self, address)

    socket.socket.connect = connect


class OpusMTTokenizer:
    """argos's tokenizer interface (``encode``/``decode`` of piece lists) for a Marian model."""

    def __init__(self, source_spm: str, target_spm: str, prefix: list[str], suffix: list[str]):
        import sentencepiece

        self.source = sentencepiece.SentencePieceProcessor(model_file=source_spm)
        self.target = sentencepiece.SentencePieceProcessor(model_file=target_spm)
        self.prefix, self.suffix = list(prefix), list(suffix)
        self.specials = set(self.prefix) | set(self.suffix) | {"</s>", "<pad>", "<unk>"}

    def encode(self, sentence: str) -> list[str]:
        return self.prefix + self.source.encode(sentence, out_type=str) + self.suffix

    def decode(self, tokens: list[str]) -> str:
        text = self.target.decode_pieces([t for t in tokens if t not in self.specials])
        return text.replace("\u2581", " ")  # pieces the target model lacks come back with their marker


def _sentencizer_class(base, split_sentences):
    class EdgeSentencizer(base):
        """argos's sentence boundary interface over edge-translator's segmenter."""

        def __init__(self, pkg):
            self.pkg = pkg

        def split_sentences(self, text: str) -> list[str]:
            return [s.strip() for s in split_sentences(text) if s.strip()]

        def __str__(self):
            return "EdgeSentencizer"

    return EdgeSentencizer


def _patch_package_tokenizer(package_module) -> None:
    import json
    from pathlib import Path

    original = package_module.Package.__init__

    def init(self, package_path):
        original(self, package_path)
        path = Path(package_path)
        opus = json.loads((path / "metadata.json").read_text()).get("opus_mt")
        if opus:
            self.tokenizer = OpusMTTokenizer(str(path / opus["source_spm"]), str(path / opus["target_spm"]),
                                             opus["source_prefix"], opus["source_suffix"])

    package_module.Package.__init__ = init


def _offline(what: str):
    def refuse(*args, **kwargs):
        raise OSError(f"edge-bench: offline, {what} not fetched")

    return refuse


def length_limit(tokens: list, max_positions: int) -> int:
    """edge-translator's decoding limit for a source of ``tokens`` (target token and ``</s>`` included)."""
    return max(1, min(2 * len(tokens) + 10, max_positions))


class _LengthLimited:
    """A ctranslate2.Translator whose ``translate_batch`` stops where edge-translator's decoding does."""

    def __init__(self, translator, max_positions: int, exact: bool):
        self._translator, self._max_positions, self._exact = translator, max_positions, exact

    def translate_batch(self, source, **kwargs):
        if not self._exact:
            longest = max((length_limit(tokens, self._max_positions) for tokens in source), default=1)
            return self._translator.translate_batch(source, max_decoding_length=longest, **kwargs)
        results = []
        for tokens in source:  # CTranslate2 takes one length per call
            length = length_limit(tokens, self._max_positions)
            one = {k: (v[:1] if k == "target_prefix" and v else v) for k, v in kwargs.items()}
            results += self._translator.translate_batch([tokens], min_decoding_length=length,
                                                        max_decoding_length=length, **one)
        return results

    def __getattr__(self, name):
        return getattr(self._translator, name)


def _patch_length(translate_module, max_positions: int, exact: bool) -> None:
    import types

    real = translate_module.ctranslate2
    shim = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")})
    shim.Translator = lambda *a, **k: _LengthLimited(real.Translator(*a, **k), max_positions, exact)
    translate_module.ctranslate2 = shim


def apply_patches(segmenter: str, length: str = "", max_positions: int = 0) -> list[str]:
    """Patch argos and LibreTranslate in memory; the names of the patches applied.

    Args:
        segmenter: Path of edge-translator's ``core/text.py``.
        length: ``"cap"`` or ``"exact"`` (:data:`LENGTH_PATCHES`); ``""`` leaves argos's
            decoding length alone.
        max_positions: The model's positions (the daemon's limit never exceeds them).
    """
    if length and length not in LENGTH_PATCHES:
        raise ValueError(f"length must be one of {sorted(LENGTH_PATCHES)} or empty, not {length!r}")
    refuse_remote_connections()
    from argostranslate import package, sbd, translate

    cls = _sentencizer_class(sbd.ISentenceBoundaryDetectionModel, load_segmenter(segmenter))
    for module in (sbd, translate):  # translate imported the name: its binding is the one used
        module.MiniSBDSentencizer = cls
        module.StanzaSentencizer = cls
        module.SpacySentencizerSmall = cls
    _patch_package_tokenizer(package)
    package.update_package_index = _offline("the argos package index")
    try:
        import libretranslate.init as lt_init

        lt_init.download_models = _offline("MiniSBD models")
    except ImportError:
        pass
    applied = list(PATCHES)
    if length:
        _patch_length(translate, max_positions, exact=length == "exact")
        applied.append(f"length_{length}")
    return applied


def main(argv: list[str] | None = None) -> None:
    """Patch, then run LibreTranslate's own ``main`` with the flags after ``--``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segmenter", required=True)
    parser.add_argument("--length", choices=sorted(LENGTH_PATCHES), default="")
    parser.add_argument("--max-positions", type=int, default=512)
    parser.add_argument("libretranslate_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    # run by path, this file's folder leads sys.path, and our bench/libretranslate.py would
    # shadow the real libretranslate package (``python -I`` leaves it out on 3.11+)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    applied = apply_patches(args.segmenter, args.length, args.max_positions)
    print(f"{READY_LINE} {', '.join(applied)}", file=sys.stderr, flush=True)
    rest = [a for a in args.libretranslate_args if a != "--"]
    sys.argv = ["libretranslate", *rest]
    from libretranslate.main import main as lt_main

    lt_main()


if __name__ == "__main__":
    main()
