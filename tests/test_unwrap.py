"""The unwrapping rule (core/unwrap.py) on text as people paste it: prose hard-wrapped at
many widths, words hyphenated at line ends, text that pdftotext gives from PDFs made by
reportlab and by LibreOffice; and what must stay line by line: lists, addresses, verse,
code, headings, short lines and blank-line paragraphs.

What the model reads (the text with the rule's edits applied) must be the unwrapped
paragraph itself, so the translation cannot differ from the unwrapped paragraph's.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from edge_translator.core.unwrap import apply_edits, continuations, glue, unwrap_edits

from .conftest import ROOT

TEST_SENTENCES = [line.split("\t")[3] for line in
                  (ROOT / "assets" / "eval" / "tatoeba-cmn-eng-test.tsv").read_text("utf-8").splitlines()]

#: Prose as people paste it: instructions, an e-mail, news, a manual, a story.
PROSE = [
    "Before you install the update, save your work and close all other programs. The installation takes "
    "about ten minutes. Do not turn off the computer while the update is being installed.",
    "Thanks for your message about the meeting next week. I will be out of the office on Monday and Tuesday, "
    "so please send the final report to Anna, who will review it before the meeting on Friday afternoon.",
    "The city council voted on Tuesday to extend the opening hours of the public library, which has seen a "
    "sharp rise in visitors since the new reading room opened in the spring.",
    "To reset the router, press and hold the small button on the back of the device for ten seconds, until "
    "the power light starts to blink. Then wait two minutes before you connect your computer again.",
    "It was late in the evening when the train finally arrived at the small station in the mountains, and "
    "the few passengers who got off walked quickly towards the only hotel in the village.",
]


def view(text: str, is_word=None) -> str:
    return apply_edits(text, unwrap_edits(text, is_word))[0]


_SENTENCE_END = re.compile(r"[.!?;:][\"')]*\n")


def reads_as(wrapped: str, para: str) -> bool:
    """Whether ``wrapped`` is read as ``para``, line breaks aside: the breaks left in it all
    fall between sentences (where the sentence splitter cuts anyway, so the translation of
    each sentence is the same)."""
    seen = view(wrapped)
    return seen.replace("\n", " ") == para and seen.count("\n") == len(_SENTENCE_END.findall(seen))


def paragraphs(seed: int, count: int = 40) -> list[str]:
    """Paragraphs of three to seven test sentences (and the prose above)."""
    rng = random.Random(seed)
    made = [" ".join(rng.sample(TEST_SENTENCES, rng.randint(3, 7))) for _ in range(count)]
    return PROSE + made


@pytest.mark.parametrize("width", [30, 40, 50, 60, 72, 80, 100])
def test_a_paragraph_wrapped_at_any_width_reads_as_the_paragraph(width):
    """Greedy wrapping (text editors, e-mail, terminals) at each width: every paragraph of
    more than one line is read whole; several paragraphs with blank lines stay apart."""
    paras = [p for p in paragraphs(width) if len(p) > width * 2]
    whole = 0
    for para in paras:
        wrapped = textwrap.fill(para, width)
        assert reads_as(wrapped, para), wrapped
        whole += view(wrapped) == para
    assert whole >= 0.8 * len(paras), "most paragraphs come back as one line"
    text = "\n\n".join(textwrap.fill(p, width) for p in PROSE)
    assert view(text) == "\n\n".join(PROSE)


@pytest.mark.parametrize("indent", ["  ", "    ", "\t"])
def test_indented_and_first_line_indented_paragraphs(indent):
    para = PROSE[0]
    block = textwrap.fill(para, 60, initial_indent=indent, subsequent_indent=indent)
    assert view(block) == indent + para
    first = textwrap.fill(para, 60, initial_indent=indent)  # a typeset paragraph's first-line indent
    assert view(first) == indent + para


def test_list_items_with_wrapped_text_join_under_their_marker_only():
    items = ["- " + textwrap.fill(PROSE[1], 60, subsequent_indent="  "),
             "- " + textwrap.fill(PROSE[3], 60, subsequent_indent="  "),
             "- a short item"]
    got = view("\n".join(items))
    assert got == "- " + PROSE[1] + "\n- " + PROSE[3] + "\n- a short item"
    numbered = "\n".join(f"{n}. " + textwrap.fill(p, 70, subsequent_indent="   ") for n, p in enumerate(PROSE[:3], 1))
    assert view(numbered) == "\n".join(f"{n}. {p}" for n, p in enumerate(PROSE[:3], 1))


def _hyphenate(para: str, width: int, rng: random.Random) -> str:
    """Wrap at ``width``, splitting a long word at the line end with a hyphen as a typesetter
    would ("transla-" / "tion"), at least three letters on each side."""
    words, lines, line = para.split(" "), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            bare = re.fullmatch(r"[a-z]{6,}[.,]?", word)
            room = width - len(line) - 2
            if bare and room >= 3 and rng.random() < 0.8:
                cut = min(room, len(word.rstrip(".,")) - 3)
                lines.append(f"{line} {word[:cut]}-")
                line = word[cut:]
                continue
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(lines)


@pytest.mark.parametrize("width", [40, 60, 75])
def test_words_hyphenated_at_line_ends_are_joined_without_the_hyphen(width):
    """With a word list that knows the paragraphs' words (the faces pass the dictionary's)."""
    rng = random.Random(width)
    split = 0
    paras = paragraphs(width + 1) + [
        "The international organisation published a comprehensive documentation of the "
        "translation procedures and the administrative requirements for applications."]
    known = {w.lower() for p in paras for w in re.findall(r"[A-Za-z]+", p)}
    for para in paras:
        wrapped = _hyphenate(para, width, rng)
        split += len(re.findall(r"[a-z]-\n", wrapped))
        seen = view(wrapped, known.__contains__)
        assert seen.replace("\n", " ") == para and seen.count("\n") == len(_SENTENCE_END.findall(seen)), wrapped
    assert split >= 10, "the test split too few words to mean anything"


@pytest.mark.parametrize("compound", ["well-known", "long-term", "self-aware", "state-of-the-art", "twenty-one",
                                      "up-to-date", "high-quality"])
def test_a_compound_split_at_its_hyphen_keeps_it(compound):
    left, right = compound.split("-", 1)
    text = (f"This paragraph is wrapped by a program, and the writer said it is {left}-\n"
            f"{right} among the people who read it every single day of the week.")
    assert f" {compound} " in view(text, is_word=WORDS.__contains__)


#: A small word list for the hyphen decision (the dictionary's word list in the faces).
WORDS = {"well", "known", "long", "term", "self", "aware", "state", "of", "the", "art", "twenty", "one", "up",
         "to", "date", "mail", "high", "quality", "translation", "international", "documentation"}


def test_glue_by_word_list_and_by_suffix():
    is_word = WORDS.__contains__
    assert glue("the transla-", "tion of", is_word) == (1, "")
    assert glue("a well-", "known fact", is_word) == (0, "")
    assert glue("a transla-", "tion", None) == (1, "")
    assert glue("ends here.", "Next", is_word) == (0, " ")
    assert glue("hyphen before a capital-", "Letter", is_word) == (0, " ")


LINE_BY_LINE = {
    "address": "John Smith\n1600 Pennsylvania Avenue NW\nWashington, DC 20500\nUnited States of America",
    "verse": "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n"
             "Rough winds do shake the darling buds of May,\nAnd summer's lease hath all too short a date;",
    "verse without end marks": "I wandered lonely as a cloud\nThat floats on high o'er vales and hills,\n"
                               "When all at once I saw a crowd,\nA host, of golden daffodils;",
    "bullets": "Before you start, check the following things very carefully:\n"
               "- the power cable is connected to the wall socket\n- the network cable is plugged in\n"
               "* all other programs are closed\n• the battery is charged to at least fifty percent",
    "numbered": "1. Open the Settings app on your phone.\n2. Tap Network and then choose the name of the network.\n"
                "3) Enter the password that is printed on the label.\n(4) Tap Connect.\na) Wait for the icon.",
    "code": "def translate(text, options=None):\n    result = model.run(text)\n    return result.strip()\n",
    "shell": "$ sudo apt-get update\n$ sudo apt-get install edge-translator --no-install-recommends\n",
    "indented block": "Run these commands in a terminal window to install the program:\n\n"
                      "    sudo apt-get update\n    sudo apt-get install edge-translator --yes\n",
    "heading": "Installing the update on a computer that runs Windows\n\nBefore you install it, save your work.",
    "one sentence a line": "I like tea very much and I drink it every morning before work.\n"
                           "The station is near the park.\nWhere is the hotel that you told me about yesterday?\n"
                           "Thank you for your help.",
    "short lines": "Hi Tom,\nSee you soon.\nMary",
    "blank-line paragraphs": "The first paragraph is here.\n\nThe second paragraph is here.\n\nThe third.",
    "table": "Name          Age   City\nJohn Smith    34    London\nMary Jones    29    Paris",
    "signature": "Best regards,\nMary Jones\nSenior Product Manager, Example Corporation Ltd.\nTel. +44 20 7946 0000",
}


@pytest.mark.parametrize("kind", sorted(LINE_BY_LINE))
def test_what_people_mean_line_by_line_stays_line_by_line(kind):
    text = LINE_BY_LINE[kind]
    assert view(text) == text
    # beside wrapped prose, the prose joins and this does not
    prose = textwrap.fill(PROSE[2], 64)
    assert view(f"{prose}\n\n{text}\n\n{prose}") == f"{PROSE[2]}\n\n{text}\n\n{PROSE[2]}"


def test_a_heading_above_its_wrapped_paragraph_stays_its_own_line():
    text = "Installing the update\n" + textwrap.fill(PROSE[0], 64)
    assert view(text) == "Installing the update\n" + PROSE[0]


def test_soft_hyphens_and_ligatures_are_read_as_the_word():
    text = "The ﬁnal ofﬁce docu\u00adment was ﬂown to the ofﬂine staﬀ."
    assert view(text) == "The final office document was flown to the offline staff."


def test_continuations_of_a_block():
    lines = textwrap.fill(PROSE[0], 50).split("\n")
    assert continuations(lines) == [True] * (len(lines) - 1)
    assert continuations(LINE_BY_LINE["verse"].split("\n")) == [False] * 3
    assert continuations(["one line"]) == []


def test_edits_map_every_offset_back_into_the_text():
    text = textwrap.fill(PROSE[0], 40) + "\n\nThe ﬁle is here."
    edits = unwrap_edits(text)
    seen, back = apply_edits(text, edits)
    assert len(back) == len(seen) + 1 and back[0] == 0 and back[-1] == len(text)
    assert all(a <= b for a, b in zip(back, back[1:]))
    for m in re.finditer(r"\S+", seen):  # each word maps to the same word in the input
        if "ﬁ" not in text[back[m.start()]: back[m.end()]]:
            assert text[back[m.start()]: back[m.end()]] == m.group()


# -- text as pdftotext gives it from PDFs -------------------------------------------------------
PAGE_TEXT = [PROSE[i % len(PROSE)] + " " + " ".join(TEST_SENTENCES[20 * i: 20 * i + 6]) for i in range(9)]


def _pdftotext(pdf: Path) -> str:
    tool = shutil.which("pdftotext")
    assert tool, "pdftotext is missing: tests/setup.sh installs poppler-utils"
    return subprocess.run([tool, str(pdf), "-"], capture_output=True, text=True, check=True, timeout=60).stdout


def _reportlab_pdf(path: Path) -> None:
    from reportlab.lib.pagesizes import A5
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate

    styles = getSampleStyleSheet()

    def furniture(canvas, doc):
        canvas.saveState()
        canvas.setFont("Helvetica", 8)
        canvas.drawString(40, A5[1] - 30, "User Guide - Chapter 3")
        canvas.drawCentredString(A5[0] / 2, 20, str(doc.page))
        canvas.restoreState()

    story = [Paragraph("Installing the update", styles["Heading2"])]
    story += [Paragraph(text, styles["BodyText"]) for text in PAGE_TEXT]
    SimpleDocTemplate(str(path), pagesize=A5).build(story, onFirstPage=furniture, onLaterPages=furniture)


def _libreoffice_pdf(tmp_path: Path) -> Path:
    import docx
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    document = docx.Document()
    section = document.sections[0]
    section.header.paragraphs[0].text = "Installation Guide - Chapter 3"
    run = section.footer.paragraphs[0].add_run()
    for kind, instruction in (("begin", None), (None, "PAGE"), ("end", None)):
        element = OxmlElement("w:fldChar" if kind else "w:instrText")
        if kind:
            element.set(qn("w:fldCharType"), kind)
        else:
            element.text = instruction
        run._r.append(element)
    document.add_heading("Installing the update", 1)
    for text in PAGE_TEXT:
        document.add_paragraph(text)
    source = tmp_path / "guide.docx"
    document.save(source)
    soffice = shutil.which("soffice")
    assert soffice, "LibreOffice is missing: tests/setup.sh installs libreoffice-writer-nogui"
    subprocess.run([soffice, "--headless", "--norestore", "--convert-to", "pdf", "--outdir", str(tmp_path),
                    str(source)], capture_output=True, check=True, timeout=180,
                   env={"HOME": str(tmp_path / "lo-home"), "PATH": "/usr/bin:/bin"})
    return tmp_path / "guide.pdf"


@pytest.mark.parametrize("producer", ["reportlab", "libreoffice"])
def test_pdftotext_paragraphs_read_whole_across_pages_without_their_furniture(tmp_path, producer):
    if producer == "reportlab":
        pdf = tmp_path / "guide.pdf"
        _reportlab_pdf(pdf)
    else:
        pdf = _libreoffice_pdf(tmp_path)
    text = _pdftotext(pdf)
    assert text.count("\f") >= 2, "the document must span pages"
    seen = view(text)
    for para in PAGE_TEXT:  # each paragraph whole; between sentences, a line break or a space
        pattern = r"(?:\A|\n|[.?!] )" + r"".join(re.escape(w) + (r"\s+" if re.search(r"[.?!]$", w) else " ")
                                       for w in para.split(" ")[:-1]) + re.escape(para.split(" ")[-1])
        assert re.search(pattern, seen), f"not read whole: {para[:60]}"
    # some paragraph was cut by a page break in the PDF's text, with the page's furniture between
    cut = [p for p in PAGE_TEXT if p not in text.replace("\n", " ")]
    assert cut, "no paragraph crossed a page: the test checks nothing about furniture"
    assert "Installing the update" in seen.split("\n")
    # the page numbers and the running header are not read, here as anywhere
    header = "User Guide - Chapter 3" if producer == "reportlab" else "Installation Guide - Chapter 3"
    assert header not in seen and not re.search(r"(?m)^\s*\d+\s*$", seen), seen
