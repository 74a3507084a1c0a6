"""English inflected forms back to their lemma: suffix rules that undo the regular ones.

The rules only propose candidates ("studies" → "study", "stopped" → "stop", "making" →
"make", "bigger" → "big"); the caller keeps those that are words it knows. Irregular forms
("went", "children") and the forms the rules would send to the wrong word ("does" → "doe")
are what the dictionary's build stores as exceptions: it runs these same rules on every
inflection it knows and keeps only the forms they get wrong. Only the standard library.
"""

from __future__ import annotations

_VOWELS = frozenset("aeiou")
#: Short words the rules leave alone: stripping them gives nothing a reader would mean.
_MIN_LENGTH = 3


def _undouble(stem: str) -> str | None:
    """``"stopp"`` → ``"stop"``: the stem with its doubled last consonant made single."""
    if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in _VOWELS:
        return stem[:-1]
    return None


def _suffix_candidates(word: str) -> list[str]:
    """Candidates for a word with a verb or comparative suffix (-ing, -ed, -er, -est)."""
    out: list[str] = []
    for suffix in ("ing", "ed", "est", "er"):
        if not word.endswith(suffix) or len(word) - len(suffix) < 2:
            continue
        stem = word[: -len(suffix)]
        if suffix == "ing" and stem.endswith("y"):
            out.append(stem[:-1] + "ie")  # dying → die, lying → lie
        if suffix != "ing" and stem.endswith("i"):
            out.append(stem[:-1] + "y")  # studied → study, happier → happy, earliest → early
        if suffix in ("ed", "er"):
            out.append(word[:-1])  # hoped → hope, agreed → agree, nicer → nice
        elif not stem.endswith("e"):
            out.append(stem + "e")  # making → make, nicest → nice
        out.append(stem)  # walking → walk, walked → walk, taller → tall, added → add
        undoubled = _undouble(stem)
        if undoubled:
            out.append(undoubled)  # running → run, stopped → stop, bigger → big
        break
    return out


def _plural_candidates(word: str) -> list[str]:
    """Candidates for a word ending in -s (plural nouns, third-person verbs, possessives)."""
    if word.endswith("'s") or word.endswith("s'"):
        return [word[:-2] if word.endswith("'s") else word[:-1]]
    if not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return []
    out: list[str] = []
    if word.endswith("ies") and len(word) > 4:
        out.append(word[:-3] + "y")  # studies → study
    out.append(word[:-1])  # cats → cat, horses → horse
    if word.endswith("es"):
        out.append(word[:-2])  # boxes → box, goes → go
        if word.endswith("ves"):
            out += [word[:-3] + "f", word[:-3] + "fe"]  # halves → half, knives → knife
    return out


def rule_lemmas(word: str) -> list[str]:
    """The lemmas the suffix rules propose for a lowercase English word, likeliest first.

    Nothing is checked against a vocabulary here: "singing" yields "singe" before "sing",
    and the caller keeps the candidates it knows (the build stores the forms where the first
    known candidate is wrong).

    Args:
        word: One lowercase word without spaces.

    Returns:
        Candidate lemmas without repeats, never ``word`` itself; ``[]`` when no rule applies.
    """
    if len(word) < _MIN_LENGTH or " " in word:
        return []
    out: list[str] = []
    for candidate in _plural_candidates(word) + _suffix_candidates(word):
        if candidate not in out and candidate != word and len(candidate) >= 2:
            out.append(candidate)
    return out
