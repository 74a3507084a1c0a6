"""Score a bundle (or the PyTorch model it came from) on held-out pairs: sacrebleu BLEU and chrF.

Pairs are a UTF-8 TSV: either Tatoeba's four columns ``cmn_id, zh, en_id, en`` (the files
``train-demo`` writes) or two columns ``en, zh``.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

from ..core.errors import require
from .pairs import read_eval_pairs

logger = logging.getLogger(__name__)


#: An ASCII mark beside a Han character, as Chinese text does not write it (not between digits).
_ASCII_BESIDE_HAN = re.compile(r"[\u4e00-\u9fff][,.?!:;()]|[,.?!:;()][\u4e00-\u9fff]")

#: A unit of one to four characters written three or more times in a row.
_REPEATED_UNIT = re.compile(r"(.{1,4}?)\1{2,}", re.DOTALL)
_HAN = re.compile(r"[\u3400-\u9fff]")


def stutters(text: str) -> str | None:
    """The first stutter in a translation, or ``None``: a unit of one to four characters with
    a Han character in it, three or more times in a row (先先先先, 签签签, 的话的话的话).
    Chinese doubles words (谢谢, 看看), it does not triple them; runs of digits, dots or dashes
    have no Han character and do not count. The repetition guard of the decoder stops only
    loops of 12 tokens and more, so these reach the user."""
    for match in _REPEATED_UNIT.finditer(text):
        if _HAN.search(match.group(1)):
            return match.group(0)
    return None


def score(hypotheses: list[str], references: list[str]) -> dict:
    """sacrebleu corpus BLEU (``tokenize="zh"``) and chrF, how many outputs hold an ASCII
    mark beside a Han character (``ascii_punctuation``) and how many stutter (:func:`stutters`)."""
    require("sacrebleu", "eval")
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(tokenize="zh"), CHRF()
    return {"bleu": round(bleu.corpus_score(hypotheses, [references]).score, 2),
            "chrf": round(chrf.corpus_score(hypotheses, [references]).score, 2),
            "sentences": len(references), "signature": str(bleu.get_signature()),
            "ascii_punctuation": sum(1 for h in hypotheses if _ASCII_BESIDE_HAN.search(h)),
            "stutters": sum(1 for h in hypotheses if stutters(h))}


def evaluate_bundle(bundle: str | Path, pairs: str | Path, limit: int | None = None, threads: int | None = None,
                    batch_size: int = 32, hypotheses_out: list | None = None, shortlist: bool = True) -> dict:
    """Translate the pairs' English with a bundle (greedy, defaults) and score it.

    Args:
        hypotheses_out: If given, the translations are appended to it.
        shortlist: Use the bundle's vocabulary shortlist, when it has one.
    """
    from ..core.engine import EngineOptions
    from ..core.translator import TranslateOptions, Translator

    sources, references = read_eval_pairs(pairs, limit)
    with Translator.load(bundle, threads=threads, cache=None,
                         engine=EngineOptions(max_batch_size=batch_size)) as translator:
        start = time.perf_counter()
        # the model's translations: a lone word or term is not handed to the dictionary
        hypotheses = translator.translate_batch(sources, TranslateOptions(shortlist=shortlist, dictionary=False))
    if hypotheses_out is not None:
        hypotheses_out.extend(hypotheses)
    result = score(hypotheses, references)
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def evaluate_torch(model_dir: str | Path, pairs: str | Path, limit: int | None = None) -> dict:
    """Translate with the PyTorch model (``generate``, greedy) and score it."""
    transformers = require("transformers", "export")
    from .export import TARGET_VARIANTS

    sources, references = read_eval_pairs(pairs, limit)
    model = transformers.MarianMTModel.from_pretrained(str(model_dir)).eval()
    start = time.perf_counter()
    hypotheses = greedy_translate(model, Path(model_dir), sources, TARGET_VARIANTS["zh-Hans"])
    result = score(hypotheses, references)
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def greedy_translate(model, hf: Path, sentences: list[str], target_token: str, batch: int = 64,
                     max_new_tokens: int = 96) -> list[str]:
    """Translate with PyTorch ``generate`` (greedy), for dev BLEU and the PyTorch figure.

    Args:
        target_token: The language token put before each source, e.g. ``>>cmn_Hans<<``.
    """
    torch = require("torch", "export")
    transformers = require("transformers", "export")
    tokenizer = transformers.MarianTokenizer.from_pretrained(str(hf))
    out = []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(sentences), batch):
            chunk = [f"{target_token} {s}" for s in sentences[start:start + batch]]
            enc = tokenizer(chunk, return_tensors="pt", padding=True)
            ids = model.generate(**enc, num_beams=1, do_sample=False, max_new_tokens=max_new_tokens)
            out.extend(tokenizer.batch_decode(ids, skip_special_tokens=True))
    return out
