"""Sentence segmentation: named cases by class, exact reassembly, and long sentences that never lose text."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_translator import split_sentences
from edge_translator.core.text import segment

#: Cases whose whitespace is checked exactly too.
EXACT = {
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
    "It was over . . . . Then we left.": ["It was over . . . . ", "Then we left."],
    "Gas.[1] [2] It burns.": ["Gas.[1] [2] ", "It burns."],
    "1.) One. 2.) Two.": ["1.) One. ", "2.) Two."],
    "...\nHello.\n": ["...\nHello.\n"],
    "Hello.\n* * *\nBye.": ["Hello.\n* * *\n", "Bye."],
    "?! ...": ["?! ..."],
}


@pytest.mark.parametrize("text,expected", EXACT.items(), ids=[f"exact-{i}" for i in range(len(EXACT))])
def test_exact_cases(text, expected):
    assert split_sentences(text) == expected


#: Cases by class: the input and the sentences (stripped) it must give.
CASES = {
    'spaced_ellipsis': [
        ('He wrote that the plan was . . . not entirely his own. Nobody believed him.',
         ['He wrote that the plan was . . . not entirely his own.', 'Nobody believed him.']),
        ('The witness said the car was red . . . or maybe brown.',
         ['The witness said the car was red . . . or maybe brown.']),
        ('“We will build the road . . . and we will finish it.”',
         ['“We will build the road . . . and we will finish it.”']),
        ('The report ends with a warning . . . . The council ignored it.',
         ['The report ends with a warning . . . .', 'The council ignored it.']),
        ('Her diary stops abruptly. . . . Two pages are missing.',
         ['Her diary stops abruptly.', '. . . Two pages are missing.']),
        ('It was, she said, “the end of an era. . . .”',
         ['It was, she said, “the end of an era. . . .”']),
        ('The law applies to every citizen . . . I repeat, every citizen.',
         ['The law applies to every citizen . . . I repeat, every citizen.']),
        ('She hesitated . . . and then signed.',
         ['She hesitated . . . and then signed.']),
    ],
    'ellipsis': [
        ('I thought you knew... Apparently not.',
         ['I thought you knew...', 'Apparently not.']),
        ('Well… maybe tomorrow.',
         ['Well… maybe tomorrow.']),
        ('And then… Silence. Nobody moved.',
         ['And then…', 'Silence.', 'Nobody moved.']),
        ('He muttered something...then left the room.',
         ['He muttered something...then left the room.']),
    ],
    'bracketed_ellipsis': [
        ('The letter reads: “I regret [...] that I cannot attend.” It is signed by the mayor.',
         ['The letter reads: “I regret [...] that I cannot attend.”', 'It is signed by the mayor.']),
        ('“Freedom is never given […] It is won,” he wrote.',
         ['“Freedom is never given […] It is won,” he wrote.']),
        ('The clause (...) Was struck out in 1990.',
         ['The clause (...) Was struck out in 1990.']),
        ('Their motto was “work [. . .] and rest.”',
         ['Their motto was “work [. . .] and rest.”']),
    ],
    'inline_list': [
        ('1.) Mix the flour. 2.) Add two eggs. 3.) Bake for an hour.',
         ['1.) Mix the flour.', '2.) Add two eggs.', '3.) Bake for an hour.']),
        ('1. Open the valve 2. Wait ten seconds 3. Close it',
         ['1. Open the valve', '2. Wait ten seconds', '3. Close it']),
        ('a. Apples are red. b. Bananas are yellow. c. Grapes are green.',
         ['a. Apples are red.', 'b. Bananas are yellow.', 'c. Grapes are green.']),
        ('• 4. Check the oil • 5. Check the tyres',
         ['• 4. Check the oil', '• 5. Check the tyres']),
        ('(a) The buyer pays the fee. (b) The seller delivers the goods.',
         ['(a) The buyer pays the fee.', '(b) The seller delivers the goods.']),
        ('i. Read the question ii. Plan your answer iii. Write it out',
         ['i. Read the question', 'ii. Plan your answer', 'iii. Write it out']),
        ('You will need: 1) a hammer 2) some nails 3) patience',
         ['You will need:', '1) a hammer', '2) some nails', '3) patience']),
        ('Rules: a) no shouting b) no running',
         ['Rules:', 'a) no shouting', 'b) no running']),
        ('IV. Results V. Discussion',
         ['IV. Results', 'V. Discussion']),
    ],
    'not_a_list': [
        ('The score was 2. Then it was 3. Finally it was 4.',
         ['The score was 2.', 'Then it was 3.', 'Finally it was 4.']),
        ('Plan A. Then Plan B. Nothing worked.',
         ['Plan A.', 'Then Plan B.', 'Nothing worked.']),
        ('The court asks (a) whether the contract exists, and (b) whether it was broken.',
         ['The court asks (a) whether the contract exists, and (b) whether it was broken.']),
        ('He scored in 1999. 2000 was worse.',
         ['He scored in 1999.', '2000 was worse.']),
    ],
    'citation': [
        ('Helium is a noble gas.[1] It was discovered in 1868.[2]',
         ['Helium is a noble gas.[1]', 'It was discovered in 1868.[2]']),
        ('The city has 40,000 people. [3][4] Its mayor is elected.',
         ['The city has 40,000 people. [3][4]', 'Its mayor is elected.']),
        ('The tower is 300 m tall.[citation needed] Tourists visit it daily.',
         ['The tower is 300 m tall.[citation needed]', 'Tourists visit it daily.']),
        ('It closed in 1998.[12] A museum opened in its place.',
         ['It closed in 1998.[12]', 'A museum opened in its place.']),
        ('The name is of Welsh origin.[a] Locals shorten it.',
         ['The name is of Welsh origin.[a]', 'Locals shorten it.']),
        ('The bridge was rebuilt twice.[note 1] The last repair was in 2004.',
         ['The bridge was rebuilt twice.[note 1]', 'The last repair was in 2004.']),
        ('Sales rose by 4%,[5] mostly in Asia.[6][7] Profits fell.',
         ['Sales rose by 4%,[5] mostly in Asia.[6][7]', 'Profits fell.']),
        ('It is toxic.[2–4] Handle it with care.',
         ['It is toxic.[2–4]', 'Handle it with care.']),
    ],
    'dotted_abbreviation': [
        ('She moved to the U.K. Where else could she go?',
         ['She moved to the U.K.', 'Where else could she go?']),
        ('Prices are lower in the U.S. The reason is simple.',
         ['Prices are lower in the U.S.', 'The reason is simple.']),
        ('He served in the U.S. Navy for ten years.',
         ['He served in the U.S. Navy for ten years.']),
        ('They met in Washington, D.C. It was raining.',
         ['They met in Washington, D.C.', 'It was raining.']),
        ('Bring a snack, e.g. an apple. Lunch is not provided.',
         ['Bring a snack, e.g. an apple.', 'Lunch is not provided.']),
        ('Some metals, e.g. Iron and Nickel, are magnetic.',
         ['Some metals, e.g. Iron and Nickel, are magnetic.']),
        ('He earned an M.A. She earned a Ph.D.',
         ['He earned an M.A.', 'She earned a Ph.D.']),
        ('The U.N. Security Council met today.',
         ['The U.N. Security Council met today.']),
        ('I grew up in the U.S. I moved to Canada in 2010.',
         ['I grew up in the U.S.', 'I moved to Canada in 2010.']),
    ],
    'single_letter': [
        ('Between you and I. Nobody else must know.',
         ['Between you and I.', 'Nobody else must know.']),
        ('Send it to Mary J. Blige tomorrow.',
         ['Send it to Mary J. Blige tomorrow.']),
        ('It was written by John F. Kennedy. He was young then.',
         ['It was written by John F. Kennedy.', 'He was young then.']),
        ('The winner was Plan B. It cost less.',
         ['The winner was Plan B.', 'It cost less.']),
        ('He and I. Did anyone else come?',
         ['He and I.', 'Did anyone else come?']),
        ('The paper by Smith, J. R. was cited often.',
         ['The paper by Smith, J. R. was cited often.']),
        ('Take vitamin C. It helps.',
         ['Take vitamin C.', 'It helps.']),
    ],
    'abbreviation': [
        ('Mrs. Patel and Prof. Okafor arrived late. The talk began.',
         ['Mrs. Patel and Prof. Okafor arrived late.', 'The talk began.']),
        ('The meeting is on Feb. 12 at noon.',
         ['The meeting is on Feb. 12 at noon.']),
        ('See Fig. 3 and pp. 10–12 for details. Then read ch. 4.',
         ['See Fig. 3 and pp. 10–12 for details.', 'Then read ch. 4.']),
        ('Bring tents, ropes, stoves, etc. We leave at dawn.',
         ['Bring tents, ropes, stoves, etc.', 'We leave at dawn.']),
        ('Bring tents, ropes, stoves, etc. to the hall.',
         ['Bring tents, ropes, stoves, etc. to the hall.']),
        ('He works for Globex Corp. The firm is growing.',
         ['He works for Globex Corp.', 'The firm is growing.']),
        ('Dr. Wu lives on Elm St. near the school.',
         ['Dr. Wu lives on Elm St. near the school.']),
        ('The song is by Harry Connick Jr. It was a hit.',
         ['The song is by Harry Connick Jr.', 'It was a hit.']),
        ('Smith et al. found no effect. Others disagreed.',
         ['Smith et al. found no effect.', 'Others disagreed.']),
        ('Brown v. Board of Education was decided in 1954.',
         ['Brown v. Board of Education was decided in 1954.']),
        ('He is No. 1 in the world. I said no. She laughed.',
         ['He is No. 1 in the world.', 'I said no.', 'She laughed.']),
        ('Lt. Col. Reyes spoke first. Sgt. Diaz followed.',
         ['Lt. Col. Reyes spoke first.', 'Sgt. Diaz followed.']),
    ],
    'abbreviation_more': [
        ('The GmbH & Co. KG is a partnership. It pays tax.',
         ['The GmbH & Co. KG is a partnership.', 'It pays tax.']),
        ('She gave him the i.v. It was late. He got an I.V. in his arm.',
         ['She gave him the i.v.', 'It was late.', 'He got an I.V. in his arm.']),
        ('Apt. 4B is empty. Founded est. 1850, it is old.',
         ['Apt. 4B is empty.', 'Founded est. 1850, it is old.']),
        ('Q. Where is it? A. It is here.',
         ['Q. Where is it?', 'A. It is here.']),
        ('Governor Stanley C. Wilson spoke. Keel, R. A. (1936) agreed.',
         ['Governor Stanley C. Wilson spoke.', 'Keel, R. A. (1936) agreed.']),
    ],
    'time': [
        ('The train leaves at 7 a.m. Be there early.',
         ['The train leaves at 7 a.m.', 'Be there early.']),
        ('We met at 4 p.m. on Friday.',
         ['We met at 4 p.m. on Friday.']),
        ('The show starts at 8 p.m. EST. Tickets are free.',
         ['The show starts at 8 p.m. EST.', 'Tickets are free.']),
        ('By 9 a.m. Dr. Lee had seen ten patients.',
         ['By 9 a.m. Dr. Lee had seen ten patients.']),
        ('It ended at 11 P.M. The crowd went home.',
         ['It ended at 11 P.M.', 'The crowd went home.']),
    ],
    'number': [
        ('The rate is 3.75 percent. It was 2.5 last year.',
         ['The rate is 3.75 percent.', 'It was 2.5 last year.']),
        ('The price rose to $12.50. Buyers complained.',
         ['The price rose to $12.50.', 'Buyers complained.']),
        ('Version 10.2.3 fixes it. Update now.',
         ['Version 10.2.3 fixes it.', 'Update now.']),
        ('The site is at 51.5074° N, 0.1278° W. It is in London.',
         ['The site is at 51.5074° N, 0.1278° W.', 'It is in London.']),
    ],
    'url_email': [
        ('Write to info@example.org. We reply within a day.',
         ['Write to info@example.org.', 'We reply within a day.']),
        ('Go to www.example.com/Help.Html for help. Then log in.',
         ['Go to www.example.com/Help.Html for help.', 'Then log in.']),
    ],
    'quotes': [
        ('“Is it late?” she asked. “Very,” he said.',
         ['“Is it late?” she asked.', '“Very,” he said.']),
        ('He yelled “Stop!” and ran. Nobody followed.',
         ['He yelled “Stop!” and ran.', 'Nobody followed.']),
        ('She said, ‘I will.’ Then she left.',
         ['She said, ‘I will.’', 'Then she left.']),
        ('Her answer was “no.” That settled it.',
         ['Her answer was “no.”', 'That settled it.']),
        ('He asked, "Did she say \'never\'?" Nobody knew.',
         ['He asked, "Did she say \'never\'?"', 'Nobody knew.']),
    ],
    'parens': [
        ('The plant closed (it had lost money for years.) Workers protested.',
         ['The plant closed (it had lost money for years.)', 'Workers protested.']),
        ('The result (see Table 2. The values are rounded.) was clear.',
         ['The result (see Table 2. The values are rounded.) was clear.']),
        ('He left early. (Nobody knew why.) The party went on.',
         ['He left early.', '(Nobody knew why.)', 'The party went on.']),
    ],
    'punctuation_runs': [
        ('What?! You sold it?? Unbelievable!!! Sit down.',
         ['What?!', 'You sold it??', 'Unbelievable!!!', 'Sit down.']),
        ('She works at Yahoo! in Paris.',
         ['She works at Yahoo! in Paris.']),
    ],
    'missing_space': [
        ('The test passed.The next one failed.',
         ['The test passed.', 'The next one failed.']),
        ('It cost 1,500.That was too much.',
         ['It cost 1,500.', 'That was too much.']),
        ('Mr.Smith is here.',
         ['Mr.Smith is here.']),
    ],
    'lowercase': [
        ('He said wait... then nothing happened.',
         ['He said wait... then nothing happened.']),
        ('Was it true? she wondered.',
         ['Was it true? she wondered.']),
    ],
    'line_break': [
        ("Roses are red\nViolets are blue\n",
         ["Roses are red", "Violets are blue"]),
        ("Dear Mr.\nSmith, hello.",
         ["Dear Mr.", "Smith, hello."]),
        ("Shopping:\n• milk\n• eggs",
         ["Shopping:", "• milk", "• eggs"]),
    ],
    'no_letter_fragment': [
        ("It ended. . . .",
         ["It ended. . . ."]),
        ("— — —\nChapter 2",
         ["— — —\nChapter 2"]),
        ("Done! !!! Next.",
         ["Done! !!!", "Next."]),
        ("The end.\n***",
         ["The end.\n***"]),
    ],
    'full_width': [
        ("Test strange period．Does it work．",
         ["Test strange period．", "Does it work．"]),
        ("我很好。你呢？",
         ["我很好。", "你呢？"]),
    ],
}
IDS = [f"{name}-{i}" for name, cases in CASES.items() for i in range(len(cases))]


@pytest.mark.parametrize("text,expected", [c for cases in CASES.values() for c in cases], ids=IDS)
def test_known_cases(text, expected):
    sentences = split_sentences(text)
    assert "".join(sentences) == text
    assert [s.strip() for s in sentences] == expected


def test_rejects_non_text():
    with pytest.raises(TypeError, match="text must be str"):
        split_sentences(b"bytes")
    assert split_sentences("") == []


#: Pieces that exercise every rule: end marks, ellipses of three kinds, brackets, list and
#: citation markers, abbreviations, quotes, full-width marks and odd whitespace.
ATOMS = (list("aB x.?!\n\t\"')(]\xa0。？，") + ["Mr.", "U.S.", "...", "…", ". . .", " . . . .", "e.g.", "3.14", "I.",
         "The", "I", "a.m.", "[1]", "[a]", "[note 2]", "[citation needed]", "[...]", "(…)", "1.)", "2.", "a.",
         "(b)", "ii.", "• 9.", "“", "”", "‘", "’", "\r\n", "***", "—"])
TEXTS = st.lists(st.sampled_from(ATOMS), max_size=40).map("".join)
ALNUM = re.compile(r"[^\W_]")


@settings(max_examples=500, deadline=None)
@given(TEXTS)
def test_join_gives_back_input(text):
    assert "".join(split_sentences(text)) == text


@settings(max_examples=500, deadline=None)
@given(TEXTS)
def test_every_sentence_has_a_letter_or_digit(text):
    sentences = split_sentences(text)
    assert all(sentences)
    if ALNUM.search(text):
        assert all(ALNUM.search(s) for s in sentences), sentences
    else:
        assert len(sentences) <= 1


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_a_line_break_ends_a_sentence(text):
    for sentence in split_sentences(text):
        head, _, rest = sentence.partition("\n")
        # Only a fragment without letters or digits may follow a line break in one sentence,
        # or precede the first words of the text.
        assert not ALNUM.search(rest) or not ALNUM.search(head), sentence


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


def test_a_cut_never_leaves_a_fragment_without_letters():
    text = "alpha beta gamma — — — delta"
    parts = [s.text for s in segment(text, WordPieces(), 4)]
    assert "".join(parts).replace(" ", "") == text.replace(" ", "")
    assert all(ALNUM.search(p) for p in parts), parts
