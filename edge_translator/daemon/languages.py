"""Language codes of the APIs the daemon speaks, mapped onto what the loaded model offers.

The model translates English into the Chinese variants its bundle lists (``zh-Hans``,
and ``zh-Hant`` for the full opus-mt-en-zh). LibreTranslate clients name them ``zh``,
``zh-Hans``, ``zh-Hant`` or ``zt``; DeepL clients ``ZH``, ``ZH-HANS`` or ``ZH-HANT``.

Detection only has to tell English from anything else, and it says how sure it is
from two signals: the share of letters that are Latin (a Chinese, Cyrillic or Arabic text
has almost none) and the share of words that are common English function words (French
or German in Latin letters has few). See :func:`english_confidence`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from .params import HTTPError

#: Client codes → bundle target names.
ALIASES = {
    "zh": None,  # the bundle's default variant
    "zh-hans": "zh-Hans", "zh-cn": "zh-Hans", "zh-sg": "zh-Hans", "cmn-hans": "zh-Hans",
    "zh-hant": "zh-Hant", "zt": "zh-Hant", "zh-tw": "zh-Hant", "zh-hk": "zh-Hant", "cmn-hant": "zh-Hant",
}
NAMES = {"zh-Hans": "Chinese (Simplified)", "zh-Hant": "Chinese (Traditional)"}
#: Codes LibreTranslate clients use for each variant, in the order /languages lists them.
LIBRE_CODES = {"zh-Hans": ("zh", "zh-Hans"), "zh-Hant": ("zt", "zh-Hant")}
DEEPL_CODES = {"zh-Hans": "ZH-HANS", "zh-Hant": "ZH-HANT"}

#: Frequent English function words; their share separates English from other Latin-script text.
FUNCTION_WORDS = frozenset("""
a about after all also am an and any are as at be because been but by can could did do does
for from had has have he her here him his how i if in into is it its just me more my no not
now of on one only or our out so some than that the their them then there these they this
to up us was we were what when where which who will with would you your hello thanks please
""".split())
WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


@dataclass(frozen=True)
class Targets:
    """The variants a bundle offers, and how client codes map onto them."""

    offered: tuple[str, ...]
    """Bundle target names, e.g. ``("zh-Hans", "zh-Hant")``."""
    default: str
    """The variant ``zh`` means."""

    def resolve(self, code: str, field: str = "target", deepl: bool = False) -> str:
        """The bundle target for a client's code.

        Raises:
            HTTPError: 400 naming the codes this model accepts (DeepL's when ``deepl``).
        """
        key = code.strip().lower()
        codes = ", ".join(self.deepl_codes() if deepl else self.codes())
        if key not in ALIASES:
            raise HTTPError(400, f"{field} {code!r} is not supported: this server translates English into "
                                 f"Chinese; use one of {codes}")
        name = ALIASES[key] or self.default
        if name not in self.offered:
            raise HTTPError(400, f"{field} {code!r} ({NAMES.get(name, name)}) is not offered by this model; "
                                 f"it offers {codes}")
        return name

    def deepl_codes(self) -> list[str]:
        """DeepL codes of the offered variants (``ZH`` first)."""
        return ["ZH"] + [DEEPL_CODES[name] for name in self.offered if name in DEEPL_CODES]

    def codes(self) -> list[str]:
        """LibreTranslate codes of the offered variants."""
        return [code for name in self.offered for code in LIBRE_CODES.get(name, (name,))]


def check_source(code: str, field: str = "source") -> bool:
    """Whether ``code`` asks for detection (``auto``); English passes, anything else is refused.

    Raises:
        HTTPError: 400 for a source language other than English.
    """
    key = (code or "auto").strip().lower()
    if key == "auto":
        return True
    if key in ("en", "en-us", "en-gb"):
        return False
    raise HTTPError(400, f"{field} {code!r} is not supported: this server translates from English (en) only")


def english_confidence(text: str) -> float:
    """How sure (0-100) it is that ``text`` is English.

    ``100 × latin × (0.6 + 0.4 × min(1, 3 × function))``, where ``latin`` is the share of
    letters in the Latin script and ``function`` the share of words that are frequent
    English function words. English prose scores 90-100, a short English phrase without
    function words 60, French or German 60-70, Chinese or Russian near 0; text with no
    letters at all (numbers, symbols) scores 50.
    """
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return 50.0
    latin = sum(1 for ch in letters if "LATIN" in unicodedata.name(ch, "")) / len(letters)
    words = [w.lower() for w in WORD.findall(text) if w.isascii()]
    function = sum(1 for w in words if w in FUNCTION_WORDS) / len(words) if words else 0.0
    return round(100 * latin * (0.6 + 0.4 * min(1.0, 3 * function)), 1)


def mostly_han(text: str) -> bool:
    """Whether most letters of ``text`` are Chinese characters."""
    letters = [ch for ch in text if ch.isalpha()]
    return bool(letters) and sum(1 for ch in letters if "CJK" in unicodedata.name(ch, "")) > len(letters) / 2


#: Below this confidence a text sent with ``source=auto`` is refused as not English.
ENGLISH_THRESHOLD = 30.0
