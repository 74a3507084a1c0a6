"""Language codes of the APIs the daemon speaks, mapped onto what the loaded model offers.

The model translates English into the Chinese variants its bundle lists (``zh-Hans``,
and ``zh-Hant`` for the full opus-mt-en-zh). LibreTranslate clients name them ``zh``,
``zh-Hans``, ``zh-Hant`` or ``zt``; DeepL clients ``ZH``, ``ZH-HANS`` or ``ZH-HANT``.

Detection only has to tell English from anything else, and it says how sure it is
from two signals: the share of letters that are Latin (a Chinese, Cyrillic or Arabic text
has almost none) and the common function words a text uses: English ones against those of
six other languages in Latin letters (French, German, Spanish, Italian, Portuguese,
Dutch), so "Ich bin in Berlin" reads as German although "in" is English too. See
:func:`english_confidence` and :func:`other_language`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from .http import HTTPError

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
#: Frequent function words (and greetings) of other languages written in Latin letters;
#: words that are also English ones count for English only.
OTHER_FUNCTION_WORDS = {language: frozenset(words.split()) - FUNCTION_WORDS for language, words in {
    "fr": "le la les un une des du de et est il elle nous vous ils elles sont dans pour pas que qui sur avec ce "
          "cette au aux je tu mais où très être suis bonjour merci",
    "de": "der die das und ist nicht ein eine ich du er sie wir ihr zu mit auf für von dem den des im bin sind "
          "wie aber auch oder sehr diesem heute weil es hallo danke",
    "es": "el la los las un una y es en que de del por para con no se su al lo como pero muy está son estoy "
          "hola gracias",
    "it": "il lo la gli le un una e è di del che per con non sono sei ma molto questo della nel ciao grazie",
    "pt": "o os as um uma e é de do da em que para com não se seu ao como mas muito está são olá obrigado",
    "nl": "de het een en van ik je niet dat die op te zijn met voor maar ook er wat dit hallo dank",
}.items()}
#: How many of another language's function words it takes to call a text that language.
OTHER_MIN_WORDS = 2
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
        key = code.strip().lower().replace("_", "-")  # zh_CN, as locale names write it
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
    key = (code or "auto").strip().lower().replace("_", "-")
    if key == "auto":
        return True
    if key in ("en", "en-us", "en-gb"):
        return False
    raise HTTPError(400, f"{field} {code!r} is not supported: this server translates from English (en) only")


def english_confidence(text: str) -> float:
    """How sure (0-100) it is that ``text`` is English.

    ``100 × latin × (0.6 + 0.4 × min(1, 3 × function))``, where ``latin`` is the share of
    letters in the Latin script and ``function`` the share of words that are frequent
    English function words; when at least :data:`OTHER_MIN_WORDS` of another language's
    function words outnumber the English ones (:func:`other_language`), ``100 × latin × 0.6 × english / (english + other)``
    instead. English prose scores 90-100, a short English phrase without function words
    (or "Hola", or "La Croix": one word is not enough to tell) 60, a French or German sentence under 30, Chinese or Russian near 0; text
    with no letters at all (numbers, symbols) scores 50.
    """
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return 50.0
    latin = sum(1 for ch in letters if "LATIN" in unicodedata.name(ch, "")) / len(letters)
    words = _words(text)
    english = sum(1 for w in words if w in FUNCTION_WORDS)
    _, hits = _likeliest_other(words)
    if hits >= OTHER_MIN_WORDS and hits > english:
        return round(100 * latin * 0.6 * english / (english + hits), 1)
    function = english / len(words) if words else 0.0
    return round(100 * latin * (0.6 + 0.4 * min(1.0, 3 * function)), 1)


def other_language(text: str) -> tuple[str | None, int]:
    """The other Latin-script language whose function words ``text`` uses most, and how
    many of its words are theirs: ``(code, count)``, or ``(None, 0)`` when none."""
    return _likeliest_other(_words(text))


def _likeliest_other(words: list[str]) -> tuple[str | None, int]:
    counts = {language: sum(1 for w in words if w in vocabulary)
              for language, vocabulary in OTHER_FUNCTION_WORDS.items()}
    language = max(counts, key=counts.get)
    return (language, counts[language]) if counts[language] else (None, 0)


def _words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text) if all("LATIN" in unicodedata.name(ch, "") for ch in w)]


def mostly_han(text: str) -> bool:
    """Whether most letters of ``text`` are Chinese characters."""
    letters = [ch for ch in text if ch.isalpha()]
    return bool(letters) and sum(1 for ch in letters if "CJK" in unicodedata.name(ch, "")) > len(letters) / 2


#: Below this confidence a text sent with ``source=auto`` is refused as not English.
ENGLISH_THRESHOLD = 30.0


def detect(text: str) -> list[dict]:
    """``[{confidence, language}]``, the likeliest first: English with its confidence, and
    below 50 also what it looks like instead (``zh`` when Han characters dominate, another
    Latin-script language by its function words, else ``und``)."""
    confidence = english_confidence(text)
    answer = [{"confidence": confidence, "language": "en"}]
    if confidence < 50:
        other = "zh" if mostly_han(text) else (other_language(text)[0] or "und")
        answer.insert(0, {"confidence": round(100 - confidence, 1), "language": other})
    return answer


def auto_source(texts: list[str], field: str, source_field: str) -> list[bool]:
    """What a request with the source left to detection may translate.

    The request is judged as a whole, as LibreTranslate does: one that is not English
    (below :data:`ENGLISH_THRESHOLD`) is refused, but a page of English with one word in
    another script is not. Texts that are mostly Chinese already are marked, so that the
    caller gives them back unchanged (DeepL's answer when source and target agree) rather
    than through an English model.

    Returns:
        Per text, whether it is already Chinese.

    Raises:
        HTTPError: 400 naming what the text looks like and how to translate it anyway.
    """
    whole = "\n".join(texts)
    confidence = english_confidence(whole)
    if confidence < ENGLISH_THRESHOLD:
        looks = detect(whole)[0]["language"]
        like = {"zh": "Chinese", "und": "another language"}.get(looks, looks)
        raise HTTPError(400, f"{field} does not look like English (it looks like {like}; English confidence "
                             f"{confidence}): this server translates English only; set {source_field} to en "
                             "to translate it anyway")
    return [mostly_han(text) for text in texts]
