"""Sentence segmentation: known cases, exact reassembly, and long sentences that never lose text."""

from hypothesis import given, settings
from hypothesis import strategies as st

from edge_translator import split_sentences
from edge_translator.core.text import segment

CASES = {
    "Mr. Smith met Dr. Chen. They talked.": ["Mr. Smith met Dr. Chen. ", "They talked."],
    "The U.S. economy grew. Prices rose.": ["The U.S. economy grew. ", "Prices rose."],
    "Use e.g. apples, i.e. fruit. Then eat.": ["Use e.g. apples, i.e. fruit. ", "Then eat."],
    "I woke at 7 a.m. Then I left.": ["I woke at 7 a.m. ", "Then I left."],
    "J. R. R. Tolkien wrote it. Read it.": ["J. R. R. Tolkien wrote it. ", "Read it."],
    "Pi is 3.14 and $1.5M is 1,000 units of version 2.0.1. Next.":
        ["Pi is 3.14 and $1.5M is 1,000 units of version 2.0.1. ", "Next."],
    "Wait... what? Really?! Yes!! Done.": ["Wait... what? ", "Really?! ", "Yes!! ", "Done."],
    'He said "Stop." Then (quietly.) Then.': ['He said "Stop." ', "Then (quietly.) ", "Then."],
    "It ended.Next one began.": ["It ended.", "Next one began."],
    "Mail a.b@example.com or see https://example.com/A.Html now. Ok.":
        ["Mail a.b@example.com or see https://example.com/A.Html now. ", "Ok."],
    "- first item\n- second item\n": ["- first item\n", "- second item\n"],
    "Para one.\n\nPara two.": ["Para one.\n\n", "Para two."],
    "1. Buy milk.\n2. Call Bob. He waits.\n": ["1. Buy milk.\n", "2. Call Bob. ", "He waits.\n"],
    "See No. 5 and Fig. 2 on Jan. 3. I said no. Then he left.":
        ["See No. 5 and Fig. 2 on Jan. 3. ", "I said no. ", "Then he left."],
    "He works at Apple Inc. The firm grew. Go to St. Louis now.":
        ["He works at Apple Inc. ", "The firm grew. ", "Go to St. Louis now."],
    "“Are you sure?” she asked. «Oui.» Next.": ["“Are you sure?” she asked. ", "«Oui.» ", "Next."],
}


def test_known_cases():
    for text, expected in CASES.items():
        assert split_sentences(text) == expected, text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("aB .?!\n\t\"')(") + ["Mr.", "U.S.", "...", "e.g.", "3.14"]),
                max_size=40).map("".join))
def test_join_gives_back_input(text):
    assert "".join(split_sentences(text)) == text


class WordPieces:
    def pieces_of(self, text):
        return text.split() or ([text] if text else [])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list("abc ,;.\n") + ["word", "—"]), max_size=120).map("".join))
def test_segments_fit_and_keep_every_character(text):
    segments = segment(text, WordPieces(), 5)
    assert "".join(s.text + s.separator for s in segments) == text
    assert all(len(WordPieces().pieces_of(s.text)) <= 5 for s in segments)


def test_long_sentence_split_at_clauses_first():
    text = "one two three, four five six, seven eight nine."
    parts = [s.text for s in segment(text, WordPieces(), 4)]
    assert parts == ["one two three,", "four five six,", "seven eight nine."]
    no_spaces = "x" * 50
    chunks = segment(no_spaces, type("C", (), {"pieces_of": lambda self, t: list(t)})(), 8)
    assert "".join(c.text for c in chunks) == no_spaces and all(len(c.text) <= 8 for c in chunks)
