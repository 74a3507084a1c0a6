"""Gettext catalogs as English→Chinese training pairs: read ``.mo`` and ``.po`` files, and
clean each (English, Chinese) pair of software text, counting why each one is dropped.

The cleaning is for a translation model, not for round-tripping a catalog: accelerator
marks (``_File``, ``&File``, ``~File``, ``文件(_F)``) and markup (``<b>``, Pango, HTML, KUIT)
are removed from both sides, placeholders are kept verbatim (``%s``, ``%1$s``, ``%(name)s``,
``{0}``, ``%1``, ``$1``, ``${VAR}``, ``%PRODUCTNAME``) but only in pairs whose two sides hold
the same multiset of them, and ``...`` becomes ``…`` on both sides.
"""

from __future__ import annotations

import re
import struct
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..core.errors import InputError

MO_MAGIC = 0x950412DE

#: Every reason a catalog entry or a pair is dropped, in the order the checks run.
DROP_REASONS = (
    "header", "fuzzy", "untranslated", "credits", "multi_paragraph", "too_long", "shortcut",
    "markup_mismatch", "no_letters", "lone_format", "date_format", "placeholder_mismatch",
    "path_or_command", "code", "no_han", "mostly_latin", "length_ratio",
)
#: Strings whose "translation" is a list of translators' names, not a translation.
CREDITS = frozenset({"translator-credits", "translator_credits", "translators", "translator-credits:",
                     "your names", "your emails", "name of translators", "email of translators",
                     "credit_for_translators", "translated by"})
_CREDIT_CONTEXTS = frozenset({"NAME OF TRANSLATORS", "EMAIL OF TRANSLATORS"})


@dataclass(frozen=True)
class CatalogEntry:
    """One message of a catalog."""

    context: str | None
    """``msgctxt``, or None."""
    msgid: str
    """The English text ("" for the header)."""
    msgid_plural: str | None
    """The English plural form, or None."""
    msgstr: tuple[str, ...]
    """The translation: one string, or one per plural form."""
    fuzzy: bool = False
    """Marked fuzzy (only ``.po`` files say so; ``msgfmt`` leaves fuzzy entries out of ``.mo``)."""


@dataclass(frozen=True)
class CleanOptions:
    """What a cleaned pair may look like."""

    max_chars: int = 300
    """Longest English or Chinese text kept, in characters."""
    max_ratio: float = 2.0
    """Chinese characters per English character above which a pair is dropped (plus
    :attr:`ratio_slack`); Chinese usually needs 0.25 to 0.6."""
    min_ratio: float = 0.08
    """Chinese characters per English character below which a pair of 15 or more English
    characters is dropped."""
    ratio_slack: int = 6
    """Characters of slack for the upper ratio, so that "OK" may be "确定"."""


# -- reading ---------------------------------------------------------------------------------

def _charset(header: str) -> str:
    match = re.search(r"charset\s*=\s*([\w.:-]+)", header, re.I)
    name = match.group(1) if match else "utf-8"
    return "utf-8" if name.upper() in ("CHARSET", "") else name


def read_mo(data: bytes, name: str = "catalog") -> list[CatalogEntry]:
    """The messages of a compiled catalog, in either byte order.

    Args:
        data: The ``.mo`` file's bytes.
        name: The file's name, for error messages.

    Returns:
        Every message, the header (msgid ``""``) included, in the file's order.

    Raises:
        InputError: If ``data`` is not a ``.mo`` file, is truncated, or its text does not
            decode in the charset its header names.
    """
    if len(data) < 20:
        raise InputError(f"{name}: not a gettext .mo file (only {len(data)} bytes)")
    for order in ("<", ">"):
        if struct.unpack(order + "I", data[:4])[0] == MO_MAGIC:
            break
    else:
        raise InputError(f"{name}: not a gettext .mo file (magic {data[:4].hex()})")
    revision, count, originals, translations = struct.unpack(order + "4I", data[4:20])
    if revision >> 16 > 1:
        raise InputError(f"{name}: unknown .mo major revision {revision >> 16}")

    def string(table: int, index: int) -> bytes:
        at = table + 8 * index
        if at + 8 > len(data):
            raise InputError(f"{name}: truncated .mo file (string table entry {index} past the end)")
        length, offset = struct.unpack(order + "2I", data[at:at + 8])
        if offset + length > len(data):
            raise InputError(f"{name}: truncated .mo file (string {index} past the end)")
        return data[offset:offset + length]

    raw = [(string(originals, i), string(translations, i)) for i in range(count)]
    header = next((t for o, t in raw if o == b""), b"").decode("utf-8", "replace")
    charset = _charset(header)
    entries = []
    for original, translation in raw:
        try:
            original_text, translated = original.decode(charset), translation.decode(charset)
        except (UnicodeDecodeError, LookupError) as exc:
            raise InputError(f"{name}: text does not decode as {charset} ({exc})") from None
        context = None
        if "\x04" in original_text:
            context, original_text = original_text.split("\x04", 1)
        msgid, _, plural = original_text.partition("\x00")
        entries.append(CatalogEntry(context, msgid, plural if "\x00" in original_text else None,
                                    tuple(translated.split("\x00"))))
    return entries


_PO_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _po_string(text: str, name: str, line_no: int) -> str:
    text = text.strip()
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise InputError(f"{name}:{line_no}: expected a quoted string, found {text[:40]!r}")
    return re.sub(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)",
                  lambda m: (_PO_ESCAPES.get(m.group(1)) or
                             (chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "x" else
                              chr(int(m.group(1), 8)) if m.group(1).isdigit() else m.group(1))),
                  text[1:-1])


def read_po(text: str, name: str = "catalog") -> list[CatalogEntry]:
    """The messages of a ``.po`` file; obsolete (``#~``) entries are left out.

    Raises:
        InputError: On a line that is not a comment, a keyword or a quoted string.
    """
    entries: list[CatalogEntry] = []
    fields: dict[str, str] = {}
    fuzzy = False
    current = None

    def finish() -> None:
        nonlocal fields, fuzzy, current
        if "msgid" in fields:
            forms = sorted((int(k[7:-1]), v) for k, v in fields.items() if k.startswith("msgstr["))
            msgstr = tuple(v for _, v in forms) if forms else (fields.get("msgstr", ""),)
            entries.append(CatalogEntry(fields.get("msgctxt"), fields["msgid"], fields.get("msgid_plural"),
                                        msgstr, fuzzy))
        fields, fuzzy, current = {}, False, None

    for line_no, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            if any(k.startswith("msgstr") for k in fields):
                finish()  # a comment opens the next entry
            if stripped.startswith("#,") and "fuzzy" in stripped[2:].replace(",", " ").split():
                fuzzy = True
            continue
        keyword = re.match(r"(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?)\s+(.*)$", stripped)
        if keyword:
            key, rest = keyword.groups()
            if key in ("msgctxt", "msgid") and any(k.startswith("msgstr") for k in fields):
                finish()
            current = key
            fields[key] = _po_string(rest, name, line_no)
        elif stripped.startswith('"') and current is not None:
            fields[current] += _po_string(stripped, name, line_no)
        else:
            raise InputError(f"{name}:{line_no}: not a .po line: {stripped[:60]!r}")
    finish()
    return entries


# -- cleaning --------------------------------------------------------------------------------

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")
#: Placeholder styles, tried in this order at each position.
_PLACEHOLDER = re.compile(
    r"%[A-Z][A-Z_]{2,}\b"                                        # LibreOffice %PRODUCTNAME
    r"|%\([^()\s]+\)[-+0#]*\d*(?:\.\d+)?[a-zA-Z]"               # Python %(name)s
    r"|%(?:\d+\$)?[-+0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?"          # printf %s %5.2f %1$s %'d
    r"(?:hh|ll|[hlLqjzt]|I64|I32|I)?[diouxXeEfFgGaAcspn]"
    r"|%L?\d{1,2}(?!\d)"                                          # Qt %1 %L1
    r"|\{[A-Za-z_0-9]*(?:[:!][^{}\s]*)?\}"                        # {0} {name} {} {0:.2f}
    r"|\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$\([A-Za-z0-9_]+\)|\$\d+"    # ${VAR} $(ARG1) $1
    r"|\$[A-Z_][A-Z0-9_]+\b")                                     # $HOME
_DATE_CODE = re.compile(r"%[-_0^#]?[EO]?[A-Za-z+]")
_TAG = re.compile(r"<(/?)([A-Za-z][\w:-]*)((?:\s+[^<>]*?)?)\s*(/?)>")
#: Tags taken as markup (Pango, HTML, KDE's KUIT); other ``<words>`` are text ("<file>").
MARKUP_TAGS = frozenset((
    "a b big blockquote body br center cite code dd del div dl dt em font h1 h2 h3 h4 h5 h6 head hr "
    "html i img ins kbd li markup nobr ol p pre q qt s samp small span strike strong sub sup table td "
    "th tr tt u ul var application bcode command email emphasis envar filename icode interface link "
    "message nl note numid para placeholder resource shortcut subtitle title warning item list").split())
_EMPTY_TAGS = frozenset({"br", "img", "hr", "nl", "p", "li"})
_BREAK_TAGS = frozenset({"br", "p", "para", "nl", "li", "div", "tr", "h1", "h2", "h3"})
_ENTITY = re.compile(r"&(#\d+|#x[0-9A-Fa-f]+|lt|gt|amp|quot|apos|nbsp|hellip|mdash|ndash|copy|reg|trade);")
_ZH_MNEMONIC = re.compile(r"\s*[(（]\s*[_&~]\s*[A-Za-z0-9]\s*[)）]")
_SHORTCUT = re.compile(
    r"^\s*(?:(?:<(?:Control|Ctrl|Primary|Shift|Alt|Super|Meta|Mod\d|Hyper)>)+\S*"
    r"|(?:(?:Ctrl|Control|Alt|Shift|Super|Meta|Cmd|Win|AltGr|Fn)\s*[+-]\s*)+\S+)\s*$", re.I)
_PATH_OR_COMMAND = re.compile(
    r"(?:^|\s)--?[A-Za-z][\w-]*(?:[=,\s]|$)"      # --option, -x
    r"|(?:^|[\s\"'(])(?:~|\.{1,2})?/[\w.+-]+/"      # /usr/lib/, ~/.config/
    r"|^/[\w.+-]+"                                 # /etc
    r"|\b[A-Za-z]:\\\\"                            # C:\
    r"|\b(?:https?|ftp|file)://|\bwww\.\w"         # URLs
    r"|\b[\w.+-]+@[\w-]+\.[\w.-]+"                 # e-mail
    r"|^\s*(?:usage|Usage|USAGE):")
_CODE = re.compile(r"^\S*(?:[A-Za-z0-9]_[A-Za-z0-9]|::|[a-z]\.[a-zA-Z]|=|\(\))\S*$")
_ABBREVIATION = re.compile(r"(?<![\w@])@[a-zA-Z](?![\w.@-])")  # e2fsprogs' "@i" for "inode"
_ZH_PUNCT = {",": "，", ":": "：", ";": "；", "?": "？", "!": "！"}


def placeholders(text: str) -> Counter:
    """The placeholders in ``text`` (``%%`` is a literal percent sign, not one).

    printf's positional form counts as the plain one (``%2$s`` as ``%s``), since a
    translation reorders ``%s … %s`` into ``%2$s … %1$s``.
    """
    return Counter(re.sub(r"^%\d+\$", "%", p) for p in _PLACEHOLDER.findall(text.replace("%%", "")))


def _strip_markup(text: str) -> tuple[str, Counter]:
    """``text`` without its markup tags, and the multiset of tag names it had.

    A tag of :data:`MARKUP_TAGS` is markup when it is empty (``<br/>``, ``<br>``, ``<img>``) or
    closed in the same text; ``<list>`` alone is a word of a command's usage.
    """
    tags: Counter = Counter()
    closed = {m.group(2).lower() for m in _TAG.finditer(text) if m.group(1)}

    def replace(match: re.Match) -> str:
        name = match.group(2).lower()
        if name not in MARKUP_TAGS or not (name in closed or match.group(4) or name in _EMPTY_TAGS):
            return match.group(0)
        tags[name] += 1
        return " " if name in _BREAK_TAGS else ""

    return _TAG.sub(replace, text), tags


def _decode_entities(text: str) -> str:
    import html

    return _ENTITY.sub(lambda m: html.unescape(m.group(0)), text)


def strip_accelerators(text: str, other: str = "") -> str:
    """``text`` without keyboard accelerator marks.

    ``_File``, ``&File``, ``~File`` and ``文件(_F)`` lose their mark; ``&&`` and ``__`` are a
    literal ``&`` and ``_``. A mark inside a word (``Op_en``) is kept when the whole word
    also appears in ``other`` (the pair's other side), as an identifier like ``LC_ALL`` does.
    """
    text = _ZH_MNEMONIC.sub("", text)
    text = text.replace("&&", "\x01").replace("__", "\x02")
    marks = "_&~"

    def replace(match: re.Match) -> str:
        start = match.start()
        word = re.search(r"[\w&~]*$", text[:start]).group(0) + match.group(0) + \
            re.match(r"[\w&~]*", text[match.end():]).group(0)
        inside = start > 0 and text[start - 1].isalnum()
        if inside and word in other:
            return match.group(0)
        return match.group(0)[1:]

    pattern = re.compile(rf"[{marks}](?![A-Za-z]+;|#\d+;)[^\W_]")
    text = pattern.sub(replace, text)
    return text.replace("\x01", "&").replace("\x02", "_")


def _whitespace(text: str, chinese: bool) -> str:
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\u00a0", " ")
    text = re.sub(r"[\u200b-\u200d\ufeff]", "", text)
    if chinese:  # a line break between two Han characters is no space in Chinese
        text = re.sub(r"(?<=[\u3000-\u9fff\uff00-\uffef])\s*\n\s*(?=[\u3000-\u9fff\uff00-\uffef])", "", text)
    return re.sub(r"\s+", " ", text).strip()


def _ellipsis(text: str) -> str:
    return re.sub(r"\s*(?:\.\s?){2}\.(?!\.)", "…", text) if "..." in text or ". . ." in text else text


def _fullwidth(zh: str) -> str:
    """ASCII , : ; ? ! right after a Han character become full-width (and lose a following space)."""
    return re.sub(r"(?<=[\u3400-\u9fff])([,:;?!])(?: |(?=\S)|$)(?!\d)",
                  lambda m: _ZH_PUNCT[m.group(1)], zh)


def clean_pair(en: str, zh: str, options: CleanOptions | None = None) -> tuple[str, str] | str:
    """One (English, Chinese) pair of software text, cleaned, or why it is dropped.

    Returns:
        ``(en, zh)`` cleaned, or one of :data:`DROP_REASONS`.
    """
    options = options or CleanOptions()
    en, zh = en.strip(), zh.strip()
    if re.search(r"\n\s*\n", en) or re.search(r"\n\s*\n", zh):
        return "multi_paragraph"
    if len(en) > 4 * options.max_chars or len(zh) > 4 * options.max_chars:
        return "too_long"
    if _SHORTCUT.match(en):
        return "shortcut"
    en, en_tags = _strip_markup(en)
    zh, zh_tags = _strip_markup(zh)
    if en_tags != zh_tags:
        return "markup_mismatch"
    en, zh = strip_accelerators(en, zh), strip_accelerators(zh, en)
    en, zh = _decode_entities(en), _decode_entities(zh)
    en, zh = _ellipsis(_whitespace(en, False)), _fullwidth(_ellipsis(_whitespace(zh, True)))
    if en.endswith("…") and zh.endswith(("……", "...")):
        zh = zh.rstrip(".…") + "…"
    if len(en) > options.max_chars or len(zh) > options.max_chars:
        return "too_long"
    en_places, zh_places = placeholders(en), placeholders(zh)
    bare_en = _PLACEHOLDER.sub(" ", en.replace("%%", " "))
    if not re.search(r"[A-Za-z]", bare_en):
        return "lone_format" if en_places or _DATE_CODE.search(bare_en) else "no_letters"
    if _DATE_CODE.search(bare_en):
        return "date_format"
    if en_places != zh_places:
        return "placeholder_mismatch"
    if _PATH_OR_COMMAND.search(en):
        return "path_or_command"
    if _CODE.match(en) or _ABBREVIATION.search(en):
        return "code"
    bare_zh = _PLACEHOLDER.sub(" ", zh)
    han = len(_HAN.findall(bare_zh))
    if not han:
        return "no_han"
    if len(_LATIN_WORD.findall(bare_zh)) > han:
        return "mostly_latin"
    en_len, zh_len = len(en), len(zh)
    if zh_len > options.max_ratio * en_len + options.ratio_slack or (
            en_len >= 15 and zh_len < options.min_ratio * en_len):
        return "length_ratio"
    return en, zh


def clean_text(en: str, zh: str, options: CleanOptions | None = None) -> list[tuple[str, str]] | str:
    """:func:`clean_pair` of a message that may hold paragraphs (split at blank lines).

    Returns:
        The clean pairs of its paragraphs, paired in order when both sides have as many
        (those that fail are left out), or why the message is dropped: ``multi_paragraph``
        when the counts differ, else the reason of its only (or every) paragraph.
    """
    en_parts = [p for p in re.split(r"\n\s*\n", en.strip()) if p.strip()]
    zh_parts = [p for p in re.split(r"\n\s*\n", zh.strip()) if p.strip()]
    if len(en_parts) != len(zh_parts):
        return "multi_paragraph"
    results = [clean_pair(e, z, options) for e, z in zip(en_parts, zh_parts)]
    kept = [r for r in results if not isinstance(r, str)]
    return kept or (results[0] if results else "no_letters")


def _drop_context_prefix(msgid: str, msgstr: str) -> str:
    """``"manual|Verify"`` → ``"Verify"``: the ``context|text`` convention (Gramps, old GNOME)."""
    if "|" in msgid and "|" not in msgstr and "｜" not in msgstr:
        tail = msgid.rsplit("|", 1)[1]
        return tail or msgid
    return msgid


def _is_credits(entry: CatalogEntry) -> bool:
    return (entry.context in _CREDIT_CONTEXTS or entry.msgid.strip().lower() in CREDITS)


def entry_pairs(entries: Iterable[CatalogEntry], drops: Counter,
                options: CleanOptions | None = None) -> Iterator[tuple[str | None, str, str]]:
    """The clean ``(context, en, zh)`` pairs of a catalog's messages; ``drops`` counts the rest.

    A plural message gives one pair: the English plural form with the first Chinese form
    when the catalog has one form (Chinese has no plural), else the singular with the
    first form; whichever it is must pass :func:`clean_pair` (placeholders included), and
    the other English form is tried when it does not.
    """
    for entry in entries:
        if entry.msgid == "":
            drops["header"] += 1
            continue
        if entry.fuzzy:
            drops["fuzzy"] += 1
            continue
        zh = entry.msgstr[0] if entry.msgstr else ""
        if not zh.strip() or zh == entry.msgid or (entry.msgid_plural and zh == entry.msgid_plural):
            drops["untranslated"] += 1
            continue
        if _is_credits(entry):
            drops["credits"] += 1
            continue
        sources = [entry.msgid]
        if entry.msgid_plural is not None:
            sources = ([entry.msgid_plural, entry.msgid] if len(entry.msgstr) == 1
                       else [entry.msgid, entry.msgid_plural])
        result = clean_text(_drop_context_prefix(sources[0], zh), zh, options)
        if isinstance(result, str) and len(sources) > 1:
            second = clean_text(_drop_context_prefix(sources[1], zh), zh, options)
            if not isinstance(second, str):
                result = second
        if isinstance(result, str):
            drops[result] += 1
            continue
        for en_text, zh_text in result:
            yield (entry.context, en_text, zh_text)


def choose_translations(rows: Iterable[tuple[str, str, str, str]]) -> tuple[list[tuple[str, str, str, str]], Counter]:
    """One row per English text: the most frequent Simplified translation.

    Args:
        rows: ``(origin, zh_hans, zh_hant, en)`` rows, in a fixed order.

    Returns:
        ``(rows, dropped)``: for each English text, in order of first appearance, the row of
        its most frequent Simplified text (ties: the one seen in more origins, then the
        first in Unicode order), with the most frequent non-empty Traditional text seen
        with it and the first origin that gave it; ``dropped`` counts ``duplicate`` (the
        same pair again) and ``alternative_translation`` (another Chinese for the English).
    """
    by_en: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for origin, hans, hant, en in rows:
        by_en[en].append((origin, hans, hant))
    kept, dropped = [], Counter()
    for en, found in by_en.items():
        counts = Counter(hans for _, hans, _ in found)
        origins = defaultdict(set)
        for origin, hans, _ in found:
            origins[hans].add(origin)
        best = min(counts, key=lambda h: (-counts[h], -len(origins[h]), h))
        hants = Counter(hant for _, hans, hant in found if hans == best and hant)
        hant = min(hants, key=lambda t: (-hants[t], t)) if hants else ""
        origin = next(o for o, hans, _ in found if hans == best)
        kept.append((origin, best, hant, en))
        dropped["duplicate"] += counts[best] - 1
        dropped["alternative_translation"] += len(found) - counts[best]
    return kept, dropped
