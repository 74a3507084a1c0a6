"""Names, numbers and URLs come through the embedded model's shortlist.

With separate source and target vocabularies a shortlist counted from co-occurrence alone
drops what a sentence should copy (mozilla/translations#1192); copy-through candidates
put it back. The class: generated sentences, each with one name, number or URL in one of
several frames. Every target piece that spells the item (as ``target.spm`` writes it) is
among the sentence's candidates, so a model that copies it can; and whenever the whole
vocabulary's translation carries the item, the shortlist's does too. (The demo model
itself rarely copies: on these sentences its whole vocabulary carries 0 of 60 names, 1 of
60 numbers and 0 of 60 URLs, so the first check is the one that bites.)
"""

from __future__ import annotations

import random

import pytest

from edge_translator.core.translator import TranslateOptions, Translator
from tests.conftest import ROOT

EMBEDDED = ROOT / "models" / "tatoeba-en-zh-small"
FRAMES = ("Please call {} tomorrow.", "The answer is {}.", "I wrote {} on the board.", "Send it to {} today.",
          "Have you seen {}?", "{} is what he said.")


def _name(rng: random.Random) -> str:
    syllables = ["ka", "lo", "mi", "ra", "to", "ven", "sor", "dal", "ni", "bek", "zu", "mar"]
    return "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))).capitalize()


def _number(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        return str(rng.randint(10, 99999))
    if kind == 1:
        return f"{rng.randint(1000, 9_999_999):,}"
    if kind == 2:
        return f"{rng.randint(0, 999)}.{rng.randint(0, 99):02d}"
    if kind == 3:
        return f"{rng.randint(1, 12)}:{rng.randint(0, 59):02d}"
    return f"{rng.randint(1900, 2099)}"


def _url(rng: random.Random) -> str:
    word = _name(rng).lower()
    kind = rng.randrange(3)
    if kind == 0:
        return f"https://www.{word}.com/{_name(rng).lower()}"
    if kind == 1:
        return f"{word}@{_name(rng).lower()}.org"
    return f"http://{word}.net/{rng.randint(1, 999)}"


KINDS = {"name": _name, "number": _number, "url": _url}


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    """The embedded model with a shortlist added, its lists counted on the first 4,000
    sentences of the shipped corpus (fewer candidates than the default: a harder test)."""
    from edge_translator.toolchain.addshortlist import add_shortlist

    work = tmp_path_factory.mktemp("copying")
    english = work / "english.txt"
    lines = (ROOT / "edge_translator" / "toolchain" / "corpus" / "tatoeba-en.txt").read_text(encoding="utf-8")
    english.write_text("\n".join(lines.splitlines()[:4000]) + "\n", encoding="utf-8")
    bundle = add_shortlist(EMBEDDED, work / "bundle", english=english)
    with Translator.load(bundle, threads=2, cache=None) as t:
        assert t.model.shortlist is not None
        yield t


def _items(kind: str) -> tuple[list[str], list[str]]:
    rng = random.Random(f"copy-{kind}")
    items = [KINDS[kind](rng) for _ in range(60)]
    return items, [rng.choice(FRAMES).format(item) for item in items]


#: Copy-through maps one source piece to target pieces, so a target piece that spans two
#: source pieces is not found: the embedded model's target.spm spells "Venmarlo" with "en"
#: where its source.spm cuts "▁Ve" | "n" (7 of the 60 names' pieces, 14 of the URLs').
#: Candidates from adjacent source pieces would close it; until then these fail, and a fix
#: turns them into passes that strict xfail reports.
SPANNING = pytest.mark.xfail(strict=True, reason="a target piece spanning two source pieces is no candidate")


@pytest.mark.parametrize("kind", [pytest.param(k, marks=SPANNING) if k in ("name", "url") else k
                                  for k in sorted(KINDS)])
def test_every_piece_that_spells_the_item_is_a_candidate(translator, kind):
    tokenizer, model = translator.tokenizer, translator.model
    target = translator.bundle.targets["zh-Hans"].id
    items, texts = _items(kind)
    missing = []
    for item, text in zip(items, texts):
        allowed = set(model.output_columns([tokenizer.encode(text, target)]).ids.tolist())
        pieces = [p for p in tokenizer.target.encode(item, out_type=str)  # what the target side can say
                  if not tokenizer.target.is_unknown(tokenizer.target.piece_to_id(p))]
        ids = {tokenizer.vocab[p] for p in pieces if p in tokenizer.vocab}
        assert ids, f"target.spm spells {item!r} with no vocabulary piece"
        missing += [(item, p) for p in pieces if tokenizer.vocab.get(p) not in allowed]
    assert not missing, f"{len(missing)} pieces are not candidates, e.g. {missing[:5]}"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_what_the_whole_vocabulary_copies_the_shortlist_copies(translator, kind):
    items, texts = _items(kind)
    whole = translator.translate_batch(texts, TranslateOptions(shortlist=False))
    short = translator.translate_batch(texts)
    carried = [item in out for item, out in zip(items, whole)]
    lost = [(text, out) for item, text, out, ok in zip(items, texts, short, carried) if ok and item not in out]
    assert not lost, f"{len(lost)} of {sum(carried)} items the whole vocabulary copies are lost: {lost[:3]}"
