"""The desktop window, offscreen, on the real demo model: streaming, cancel, as-you-type,
a live event loop, alignment highlights, settings, model errors and the status bar."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QMimeData, QPointF, QSettings, Qt, QTimer, QUrl  # noqa: E402
from PySide6.QtGui import QDropEvent, QFontDatabase, QTextCursor  # noqa: E402
from PySide6.QtWidgets import (QComboBox, QFileDialog, QMessageBox, QPlainTextEdit, QProgressBar,  # noqa: E402
                               QPushButton, QTabWidget)

from edge_translator.core.translator import TranslateOptions, join_results  # noqa: E402
from edge_translator.gui import app as gui_app  # noqa: E402
from edge_translator.gui import settings as store  # noqa: E402
from edge_translator.gui.alignment import Alignment, doubtful, from_utf16, to_utf16  # noqa: E402
from edge_translator.gui.session import ModelSession  # noqa: E402
from edge_translator.gui.settings import Settings  # noqa: E402
from edge_translator.gui.stream import TranslationStream  # noqa: E402
from edge_translator.gui.translatepane import ALIGNED, DEBOUNCE_MS, DOUBTFUL, SELECTION_ROLE  # noqa: E402
from edge_translator.gui.window import MainWindow  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "models" / "tatoeba-en-zh-small"
CJK = re.compile(r"[\u4e00-\u9fff]")


def sentences(count: int, tag: str) -> str:
    """``count`` distinct sentences; ``tag`` keeps tests from hitting each other's cache."""
    return " ".join(f"The {tag} cat number {i} is sleeping on the red chair." for i in range(count))


@pytest.fixture(scope="module")
def session(qapp):
    model = ModelSession()
    model.load_now(DEMO)
    yield model
    model.close()


@pytest.fixture
def qsettings(tmp_path):
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


@pytest.fixture(autouse=True)
def dialogs(monkeypatch):
    """Record every message box instead of blocking; ``answers`` says which button to press."""
    seen, answers = [], []

    def fake_exec(box):
        buttons = box.buttons()
        seen.append(SimpleNamespace(title=box.windowTitle(), text=box.text(), details=box.informativeText(),
                                    buttons=[b.text() for b in buttons]))
        wanted = answers.pop(0) if answers else None
        for button in buttons:
            if button.text() == wanted:
                button.click()
        return 0

    monkeypatch.setattr(QMessageBox, "exec", fake_exec)
    return SimpleNamespace(seen=seen, answers=answers)


@pytest.fixture
def make_window(qtbot, session, qsettings):
    made = []

    def make(settings: Settings | None = None, model_session: ModelSession | None = None) -> MainWindow:
        window = MainWindow(model_session or session, settings or Settings(as_you_type=False), qsettings)
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        made.append(window)
        return window

    yield make
    for window in made:
        window.pane.stream.cancel()
        if window.pane.stream.active:
            qtbot.waitUntil(lambda w=window: not w.pane.stream.active, timeout=5000)


@pytest.fixture
def window(make_window):
    return make_window()


def translate_and_wait(qtbot, window: MainWindow, text: str, timeout: int = 10000) -> dict:
    window.pane.source.setPlainText(text)
    with qtbot.waitSignal(window.pane.translation_finished, timeout=timeout) as blocker:
        qtbot.mouseClick(window.pane.translate_button, Qt.MouseButton.LeftButton)
    return blocker.args[0]


# -- translating ----------------------------------------------------------------------------------


def test_translate_button_streams_every_sentence(qtbot, window, session):
    text = "The weather is nice today. I like green tea.\n\nWhere is the station?"
    qtbot.keyClicks(window.pane.source, "The weather is nice today. I like green tea.")
    qtbot.keyClick(window.pane.source, Qt.Key.Key_Return)
    qtbot.keyClick(window.pane.source, Qt.Key.Key_Return)
    qtbot.keyClicks(window.pane.source, "Where is the station?")
    assert window.pane.source.toPlainText() == text
    with qtbot.waitSignal(window.pane.translation_finished, timeout=10000) as blocker:
        qtbot.mouseClick(window.pane.translate_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0]["sentences"] == 3
    output = window.pane.target.toPlainText()
    assert CJK.search(output)
    assert len(window.pane.alignment) == 3
    # The pane holds what render() makes of the same results (now cached): the paragraph break kept.
    assert output == session.translator.translate(text)
    assert "\n\n" in output
    assert window.pane.copy_action.isEnabled()


def activate(qtbot, window) -> None:
    """Make the window the active one (shortcuts need it); on a real X server that is
    asynchronous, offscreen it is at once."""
    window.raise_()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=3000)


def test_ctrl_enter_translates(qtbot, window):
    window.pane.source.setPlainText("My brother plays the piano.")
    activate(qtbot, window)
    window.pane.source.setFocus()
    with qtbot.waitSignal(window.pane.translation_finished, timeout=10000):
        qtbot.keyClick(window.pane.source, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert CJK.search(window.pane.target.toPlainText())
    assert window.pane.source.toPlainText() == "My brother plays the piano."  # no newline typed


def test_cancel_stops_a_long_text_and_keeps_what_is_done(qtbot, window):
    window.pane.source.setPlainText(sentences(300, "cancelled"))
    started = []
    window.pane.translation_started.connect(started.append)
    qtbot.mouseClick(window.pane.translate_button, Qt.MouseButton.LeftButton)
    assert started == [300]
    qtbot.waitUntil(lambda: len(window.pane.alignment) >= 1, timeout=10000)
    assert window.pane.progress.isVisible() and window.pane.progress.maximum() == 300
    assert window.pane.cancel_button.isEnabled()
    submission = window.pane.stream.submission
    qtbot.mouseClick(window.pane.cancel_button, Qt.MouseButton.LeftButton)
    done = len(window.pane.alignment)
    partial = window.pane.target.toPlainText()
    assert submission.cancelled
    qtbot.waitUntil(lambda: not window.pane.stream.active, timeout=1000)  # the worker stops at once
    qtbot.wait(300)
    assert len(window.pane.alignment) == done < 300
    assert window.pane.target.toPlainText() == partial and CJK.search(partial)
    assert not window.pane.progress.isVisible()
    assert not window.pane.cancel_button.isEnabled()


def test_escape_cancels(qtbot, window):
    window.pane.source.setPlainText(sentences(300, "escaped"))
    qtbot.mouseClick(window.pane.translate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(window.pane.alignment) >= 1, timeout=10000)
    activate(qtbot, window)
    qtbot.keyClick(window.pane.source, Qt.Key.Key_Escape)
    assert not window.pane.stream.running
    done = len(window.pane.alignment)
    qtbot.wait(300)
    assert len(window.pane.alignment) == done < 300


def test_translate_as_you_type_debounces_and_replaces_the_run(qtbot, make_window, session):
    window = make_window(Settings(as_you_type=True))
    started, finished = [], []
    window.pane.translation_started.connect(started.append)
    window.pane.translation_finished.connect(finished.append)
    qtbot.keyClicks(window.pane.source, "Good morning, teacher.")
    assert started == []  # nothing before the pause
    qtbot.waitUntil(lambda: len(started) == 1, timeout=DEBOUNCE_MS + 2000)
    qtbot.waitUntil(lambda: len(finished) == 1, timeout=5000)
    qtbot.wait(DEBOUNCE_MS + 100)
    assert started == [1]  # one burst of typing, one translation

    # A long paste starts a run; typing more while it runs replaces it.
    window.pane.source.moveCursor(QTextCursor.MoveOperation.End)
    window.pane.source.insertPlainText(" " + sentences(300, "typed"))
    qtbot.waitUntil(lambda: len(started) == 2, timeout=DEBOUNCE_MS + 2000)
    first = window.pane.stream.submission
    assert window.pane.stream.running
    qtbot.keyClicks(window.pane.source, " Thank you.")
    qtbot.waitUntil(lambda: len(started) == 3, timeout=DEBOUNCE_MS + 2000)
    assert first.cancelled and len(finished) == 1  # the long run was replaced, not finished
    assert started[2] == 302
    qtbot.waitUntil(lambda: len(finished) == 2, timeout=30000)
    assert finished[1]["sentences"] == len(window.pane.alignment) == 302
    assert window.pane.target.toPlainText() == session.translator.translate(window.pane.source.toPlainText())


def _longest_stall(qtbot, window, text: str) -> float:
    """The longest gap between ticks of a 10 ms timer while ``text`` translates."""
    ticks = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    window.pane.source.setPlainText(text)
    timer.start()
    qtbot.wait(60)
    began = time.perf_counter()
    with qtbot.waitSignal(window.pane.translation_finished, timeout=60000) as blocker:
        window.pane.translate()
    ended = time.perf_counter()
    timer.stop()
    assert blocker.args[0]["sentences"] == len(window.pane.alignment) > 100
    during = [t for t in ticks if began - 0.02 <= t <= ended]
    assert len(during) >= 0.5 * (ended - began) / 0.010, "the timer fell behind its schedule"
    return max(b - a for a, b in zip(during, during[1:]))


@pytest.mark.perf
def test_the_event_loop_never_stalls_over_50_ms_during_a_long_translation(qtbot, window):
    """The goal, measured on the real widgets: 300 sentences stream in while a 10 ms timer
    keeps firing. The better of two runs is held to it, so one hiccup of a shared CI
    machine does not decide; the submit itself (segmenting 300 sentences) is included."""
    stalls = [_longest_stall(qtbot, window, sentences(300, f"responsive{i}")) for i in range(2)]
    print(f"longest UI stalls: {[round(s * 1000, 1) for s in stalls]} ms")
    assert min(stalls) < 0.050, f"the UI thread stalled for {min(stalls) * 1000:.0f} ms"


@pytest.mark.perf
def test_keystroke_to_first_sentence_is_under_300_ms(qtbot, make_window):
    """The goal, measured on the real widgets with translate-as-you-type: from the last
    keystroke of a short sentence to its translation in the pane (debounce included);
    the median of five sentences."""
    window = make_window(Settings(as_you_type=True))
    latencies = []
    for text in ("Good morning.", "I like green tea.", "Where is the bank?", "My cat is black.",
                 "It is cold today."):
        window.pane.source.clear()
        qtbot.wait(DEBOUNCE_MS + 150)
        window.pane.target.clear()
        qtbot.keyClicks(window.pane.source, text)
        typed = time.perf_counter()
        qtbot.waitUntil(lambda: window.pane.target.toPlainText().strip() != "", timeout=3000)
        latencies.append(time.perf_counter() - typed)
    median = sorted(latencies)[2]
    print(f"keystroke to first sentence: {[round(x * 1000) for x in latencies]} ms, median {median * 1000:.0f}")
    assert median < 0.300
    assert any(ord(ch) >= 0x4E00 for ch in window.pane.target.toPlainText())


def test_stream_reports_refused_text_as_failed(qtbot, session):
    stream = TranslationStream()
    with qtbot.waitSignal(stream.failed, timeout=2000) as blocker:
        assert stream.start(session.translator, "Hello.", TranslateOptions(target="xx-Nope")) is None
    assert "not offered" in blocker.args[0] and "\n" not in blocker.args[0]
    with qtbot.waitSignal(stream.failed, timeout=2000) as blocker:
        stream.start(session.translator, "bad \ud800 text")
    assert "Unicode" in blocker.args[0]


def test_stream_emits_nothing_after_cancel(qtbot, session):
    import threading

    stream = TranslationStream()
    got = []
    stream.sentence.connect(got.append)
    stream.finished.connect(got.append)
    stream.failed.connect(got.append)
    queued = threading.Event()
    # Learn (on the worker thread) when results are on their way to the UI thread ...
    stream._result.connect(lambda *_: queued.set(), Qt.ConnectionType.DirectConnection)
    total = stream.start(session.translator, sentences(100, "silenced"))
    assert total == 100
    assert queued.wait(10)  # ... and cancel before the UI thread has delivered any of them.
    stream.cancel()
    qtbot.waitUntil(lambda: not stream.active, timeout=2000)
    qtbot.wait(200)
    assert got == []


# -- alignment ------------------------------------------------------------------------------------


def _aligned(edit):
    return [s for s in edit.extraSelections() if s.format.property(SELECTION_ROLE) == ALIGNED]


def test_doubtful_sentences_are_shaded_in_both_panes_and_only_they(qtbot, window, monkeypatch):
    """The translation pane carries the shading in its text, the source pane as extra
    selections; a sentence written after a doubtful one is plain."""
    from PySide6.QtGui import QTextCursor

    import edge_translator.gui.alignment as alignment

    monkeypatch.setattr(alignment, "doubtful", lambda result: "odd" in result.source)
    text = "I like apples. The odd sky is blue. We go home. An odd cat sleeps. The end is near."
    translate_and_wait(qtbot, window, text)
    pairs, rendered = window.pane.alignment.pairs, window.pane.alignment.text
    assert [p.doubtful for p in pairs] == [False, True, False, True, False]
    for pair in pairs:
        cursor = QTextCursor(window.pane.target.document())
        for offset in range(*pair.target):
            cursor.setPosition(to_utf16(rendered, offset) + 1)  # the format of the character before
            assert (cursor.charFormat().property(SELECTION_ROLE) == DOUBTFUL) == pair.doubtful, pair
    shaded = sorted((from_utf16(text, s.cursor.selectionStart()), from_utf16(text, s.cursor.selectionEnd()))
                    for s in window.pane.source.extraSelections() if s.format.property(SELECTION_ROLE) == DOUBTFUL)
    assert shaded == [p.source for p in pairs if p.doubtful]


def test_the_caret_highlights_a_sentence_and_its_translation(qtbot, window, session):
    text = "I like apples. The sky is blue. We go home."
    translate_and_wait(qtbot, window, text)
    second = window.pane.alignment.pairs[1]
    assert text[slice(*second.source)] == "The sky is blue."

    cursor = window.pane.source.textCursor()
    cursor.setPosition(second.source[0] + 3)
    window.pane.source.setTextCursor(cursor)
    [target] = _aligned(window.pane.target)
    rendered = window.pane.alignment.text
    assert (target.cursor.selectionStart(), target.cursor.selectionEnd()) == tuple(
        to_utf16(rendered, i) for i in second.target)
    assert target.cursor.selectedText() == session.translator.translate("The sky is blue.")
    [source] = _aligned(window.pane.source)
    assert source.cursor.selectedText() == "The sky is blue."

    # And the other way: the caret in the third translation highlights the third sentence.
    third = window.pane.alignment.pairs[2]
    cursor = window.pane.target.textCursor()
    cursor.setPosition(to_utf16(rendered, third.target[0]) + 1)
    window.pane.target.setTextCursor(cursor)
    [source] = _aligned(window.pane.source)
    assert source.cursor.selectedText() == "We go home."

    # Editing the source makes its spans stale: the highlight goes until the next run.
    window.pane.source.moveCursor(QTextCursor.MoveOperation.End)
    window.pane.source.insertPlainText(" More.")
    assert _aligned(window.pane.source) == [] and _aligned(window.pane.target) == []


def test_a_wrapped_paragraph_comes_back_as_one_and_highlights_across_its_lines(qtbot, window, session):
    """Text pasted from a PDF or an e-mail: the pane shows one paragraph, and the caret on the
    second line of a sentence highlights the whole sentence, both of its lines."""
    text = ("Before you install the update, save your work and close all\nother programs. The installation "
            "takes about ten minutes.")
    translate_and_wait(qtbot, window, text)
    rendered = window.pane.alignment.text
    assert "\n" not in rendered.strip()
    first = window.pane.alignment.pairs[0]
    assert text[slice(*first.source)] == text[:text.index("programs.") + len("programs.")]
    assert rendered[slice(*first.target)] == session.translator.translate(text.split("\n")[0] + " other programs.")
    cursor = window.pane.source.textCursor()
    cursor.setPosition(to_utf16(text, text.index("other") + 2))
    window.pane.source.setTextCursor(cursor)
    [source] = _aligned(window.pane.source)
    assert (source.cursor.selectionStart(), source.cursor.selectionEnd()) == tuple(to_utf16(text, i) for i in first.source)
    [target] = _aligned(window.pane.target)
    assert (target.cursor.selectionStart(), target.cursor.selectionEnd()) == tuple(
        to_utf16(rendered, i) for i in first.target)


def test_a_lone_word_shows_its_dictionary_entries_under_the_translation(qtbot, window, session):
    translate_and_wait(qtbot, window, "station")
    entries = window.pane.entries
    expected = session.translator.lookup("station")
    assert entries.isVisible() and entries.entries == expected
    assert window.pane.target.toPlainText() == expected[0].headword("zh-Hans")
    assert expected[0].headword("zh-Hans") in entries.text() and expected[0].pinyin in entries.text()
    window.pane.source.insertPlainText("s")  # the text changed: its entries are stale
    assert not entries.isVisible()
    translate_and_wait(qtbot, window, "Where is the station?")
    assert not entries.isVisible() and entries.entries == []


def test_hovering_highlights_the_pair_under_the_mouse(qtbot, window):
    text = "Birds can fly. Fish can swim."
    translate_and_wait(qtbot, window, text)
    first, second = window.pane.alignment.pairs
    # The caret (at the end of the source) marks the second sentence; hovering the first moves it.
    rect = window.pane.source.cursorRect(_cursor_at(window.pane.source, first.source[0] + 2))
    qtbot.mouseMove(window.pane.source.viewport(), rect.center())
    qtbot.waitUntil(lambda: window.pane._highlight == 0, timeout=2000)
    [target] = _aligned(window.pane.target)
    assert target.cursor.selectedText() == window.pane.alignment.text[slice(*first.target)]


def _cursor_at(edit, pos):
    cursor = edit.textCursor()
    cursor.setPosition(pos)
    return cursor


def test_alignment_renders_like_the_core_and_finds_pairs(session):
    text = "Hello there. How are you?\n\nFine, thanks.  "
    results = list(session.translator.translate_iter(text))
    alignment = Alignment.build(text, results)
    assert alignment.text == join_results(results)
    for i, pair in enumerate(alignment.pairs):
        assert alignment.pair_at_source(pair.source[0]) == i
        assert alignment.pair_at_source(pair.source[1] - 1) == i
        assert alignment.pair_at_target(pair.target[0]) == i
        assert alignment.text[slice(*pair.target)] == results[i].text
    gap = alignment.pairs[1].source[1] + 1  # inside the blank line between paragraphs
    assert alignment.pair_at_source(gap) is None
    assert alignment.pair_at_source(len(text) + 5) is None


def test_qt_positions_count_utf16_units():
    text = "I love 🍕 pizza. 好吃。"
    for index in range(len(text) + 1):
        assert from_utf16(text, to_utf16(text, index)) == index
    assert to_utf16(text, text.index("pizza")) == text.index("pizza") + 1  # the emoji is two units
    assert from_utf16(text, 8) == 8  # inside the surrogate pair: after the emoji


def test_doubtful_is_below_minus_one_and_never_nan():
    assert doubtful(SimpleNamespace(score=-1.5))
    assert not doubtful(SimpleNamespace(score=-1.0))
    assert not doubtful(SimpleNamespace(score=-0.2))
    assert not doubtful(SimpleNamespace(score=math.nan))


# -- settings, model errors, status bar -----------------------------------------------------------


@pytest.fixture
def two_variant_bundle(tmp_path) -> Path:
    """The demo bundle with a second (test-only) target variant named in its manifest."""
    copy = tmp_path / "two-variants"
    shutil.copytree(DEMO, copy)
    manifest = json.loads((copy / "bundle.json").read_text(encoding="utf-8"))
    manifest["targets"]["zh-Hant"] = dict(manifest["targets"]["zh-Hans"])
    (copy / "bundle.json").write_text(json.dumps(manifest), encoding="utf-8")
    return copy


def test_settings_survive_a_restart(qtbot, make_window, qsettings, two_variant_bundle):
    own = ModelSession()
    own.load_now(two_variant_bundle)
    try:
        first = make_window(Settings(), own)
        assert first.pane.variant_box.isVisible() and first.pane.variant_box.count() == 2
        first.pane.variant_box.setCurrentIndex(first.pane.variant_box.findData("zh-Hant"))
        first.pane.as_you_type_action.trigger()
        with qtbot.waitSignal(own.loaded, timeout=10000):
            first.set_threads(1)
        qtbot.waitUntil(lambda: first.pane.translate_action.isEnabled(), timeout=2000)
        assert "1 thread" in first.model_label.text()
        first.close()

        again = store.load(qsettings)
        assert (again.threads, again.variant, again.as_you_type) == (1, "zh-Hant", False)
        assert again.geometry
        second = make_window(again, own)
        assert second.pane.variant_box.currentData() == "zh-Hant"
        assert not second.pane.as_you_type_action.isChecked()
        assert second.settings.threads == 1
    finally:
        own.close()


def test_settings_survive_garbage_in_the_store(qsettings):
    for key, value in [("threads", "many"), ("as_you_type", "maybe"), ("variant", ""), ("geometry", 7),
                       ("model", 3.5)]:
        qsettings.setValue(key, value)
    qsettings.sync()
    assert store.load(qsettings) == Settings()
    wanted = Settings(threads=3, variant="zh-Hans", as_you_type=False, output_folder="/o", open_folder="/i",
                      model="/m", geometry=b"\x01\x02")
    store.save(wanted, qsettings)
    assert store.load(QSettings(qsettings.fileName(), QSettings.Format.IniFormat)) == wanted
    store.save(Settings(), qsettings)
    assert store.load(qsettings) == Settings()


def test_a_missing_or_corrupt_model_explains_itself(qtbot, window, session, dialogs, tmp_path):
    before = session.translator
    with qtbot.waitSignal(session.failed, timeout=10000):
        window.load_model(tmp_path / "no-such-bundle")
    qtbot.waitUntil(lambda: len(dialogs.seen) == 1, timeout=2000)
    box = dialogs.seen[0]
    assert "no-such-bundle" in box.text and "does not exist" in box.details
    assert box.buttons == ["Choose another model…", "Close"]
    assert session.translator is before and window.pane.translate_action.isEnabled()

    corrupt = tmp_path / "corrupt"
    shutil.copytree(DEMO, corrupt)
    with open(corrupt / "decoder.onnx", "r+b") as handle:
        handle.truncate(100)
    with qtbot.waitSignal(session.failed, timeout=10000):
        window.load_model(corrupt)
    qtbot.waitUntil(lambda: len(dialogs.seen) == 2, timeout=2000)
    assert "decoder.onnx" in dialogs.seen[1].details
    translate_and_wait(qtbot, window, "The model still works.")
    assert CJK.search(window.pane.target.toPlainText())


def test_translating_is_disabled_while_a_model_loads(qtbot, window, session):
    with qtbot.waitSignal(session.loaded, timeout=10000):
        window.load_model(DEMO, remember=False)
        assert not window.pane.translate_action.isEnabled() and not window.pane.translate_button.isEnabled()
    assert window.pane.translate_action.isEnabled()


def test_startup_load_failure_offers_to_choose_a_model(qapp, dialogs, monkeypatch, tmp_path):
    own = ModelSession()
    try:
        dialogs.answers.append("Quit")
        assert gui_app.load_first_model(own, Settings(model=str(tmp_path / "gone"))) is None
        assert dialogs.seen[0].buttons == ["Choose a model…", "Quit"]
        assert "gone" in dialogs.seen[0].text and own.translator is None

        dialogs.answers.append("Choose a model…")
        monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(DEMO))
        settings = gui_app.load_first_model(own, Settings(model=str(tmp_path / "gone")))
        assert settings.model == str(DEMO) and own.translator is not None
    finally:
        own.close()


def test_status_bar_names_model_scheme_threads_and_speed(qtbot, window, session):
    bundle = session.translator.bundle
    assert bundle.name in window.model_label.text()
    assert bundle.scheme in window.model_label.text() and bundle.scheme == "int8r"
    assert "thread" in window.model_label.text()
    translate_and_wait(qtbot, window, "The old man walks his dog every morning.")
    assert re.fullmatch(r"\d+ tokens/s", window.speed_label.text())


# -- the window itself ----------------------------------------------------------------------------


def test_narrow_windows_stack_the_panes(qtbot, window):
    window.resize(600, 500)
    qtbot.waitUntil(lambda: window.pane.splitter.orientation() == Qt.Orientation.Vertical, timeout=2000)
    window.resize(1100, 500)
    qtbot.waitUntil(lambda: window.pane.splitter.orientation() == Qt.Orientation.Horizontal, timeout=2000)


def test_dropped_files_go_to_the_documents_panel(window, monkeypatch, tmp_path):
    added = []
    monkeypatch.setattr(window, "documents_panel", lambda: SimpleNamespace(add_files=added.extend))
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(tmp_path / "a.txt")), QUrl("https://example.org/b.txt")])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)
    window.dropEvent(event)
    assert added == [tmp_path / "a.txt"]
    assert window.tabs.currentWidget() is window.documents_tab


def test_every_control_has_an_accessible_name(window):
    for kind in (QPushButton, QComboBox, QPlainTextEdit, QProgressBar, QTabWidget):
        for widget in window.findChildren(kind):
            if widget.parent() is not None and widget.objectName().startswith("qt_"):
                continue
            assert widget.accessibleName(), f"{kind.__name__} {widget!r} has no accessible name"
    for action in (window.pane.translate_action, window.pane.cancel_action, window.pane.copy_action, window.open_action,
                   window.model_action, window.quit_action):
        assert action.shortcuts(), action.text()
    menus = {a.text(): [x.text() for x in a.menu().actions()] for a in window.menuBar().actions()}
    assert "&Threads…" in menus["&Settings"] and "Translate as you &type" in menus["&Settings"]
    assert "&Choose model…" in menus["&Model"]


def test_pyside_does_not_leak_references_to_none(qapp):
    """PySide6 6.12 on CPython 3.11 drops a reference to None at every void call, and a long
    session aborts with "deallocating None"; the gui extra pins it below 6.12 there."""
    from PySide6.QtWidgets import QLabel

    label = QLabel()
    before = sys.getrefcount(None)
    for _ in range(1000):
        label.setText("x")
    assert before - sys.getrefcount(None) < 100


def test_check_fonts_hints_at_a_cjk_font(monkeypatch):
    monkeypatch.setattr(QFontDatabase, "families", staticmethod(lambda *a: []))
    assert "fonts-noto-cjk" in gui_app.check_fonts()
    monkeypatch.setattr(QFontDatabase, "families", staticmethod(lambda *a: ["Noto Sans CJK SC"]))
    assert gui_app.check_fonts() is None


def test_the_command_has_a_gui_subcommand():
    from .conftest import run_cli

    result = run_cli("gui", "--help")
    assert result.returncode == 0 and b"--model" in result.stdout and b"--threads" in result.stdout


def test_the_app_reuses_the_users_translation_memory(qapp, monkeypatch, tmp_path):
    """What `docs` put in the memory answers the app at once; a memory that cannot be opened
    is a note, not a crash."""
    from edge_translator.core.memory import TranslationMemory

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with TranslationMemory() as memory:
        memory.add("The blue kettle is hot.", "蓝色水壶很烫（记忆库）。", "zh-Hans")
    cache, note = gui_app.open_memory()
    assert note is None
    model = ModelSession(memory=cache)
    try:
        translator = model.load_now(DEMO)
        assert translator.translate("The blue kettle is hot.") == "蓝色水壶很烫（记忆库）。"
    finally:
        model.close()
    (tmp_path / "ro").write_text("a file where the data folder should be", "utf-8")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "ro"))
    cache, note = gui_app.open_memory()
    assert cache is None and note.startswith("Translation memory not used")


# -- self-test (what build/smoke.sh runs on the built app) -----------------------------------------


def test_self_test_translates_through_the_window(qapp, window, capsys):
    from edge_translator.gui import selftest

    assert selftest.run(qapp, window, "I like tea. The station is near.") == 0
    printed = capsys.readouterr().out.strip()
    assert CJK.search(printed) and printed == window.pane.target.toPlainText().strip()
    assert window.pane.source.toPlainText() == "I like tea. The station is near."


def test_self_test_fails_in_one_line_when_the_translation_is_late(qapp, window, capsys):
    from edge_translator.gui import selftest

    assert selftest.run(qapp, window, sentences(400, "late"), timeout_ms=1) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("self-test failed: no translation within") and "\n" not in err
    window.pane.stream.cancel()


@pytest.mark.parametrize("model", ["missing", "corrupt"])
def test_the_self_test_command_exits_0_or_says_why_in_one_line(tmp_path, model):
    """As the smoke test runs it: the app starts offscreen, prints the translation, quits,
    and saves nothing (no settings, no translation memory) in the user's folders."""
    from .conftest import run_cli

    env = {"QT_QPA_PLATFORM": "offscreen", "HOME": str(tmp_path / "home"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data")}
    result = run_cli("gui", "--self-test", "I like tea.", env=env)
    assert result.returncode == 0, result.stderr
    assert CJK.search(result.stdout.decode()) and b"Traceback" not in result.stderr
    assert not any(p.is_file() for p in tmp_path.rglob("*")), list(tmp_path.rglob("*"))

    bundle = tmp_path / "bundle"
    if model == "corrupt":
        shutil.copytree(DEMO, bundle)
        (bundle / "weights.bin").write_bytes(b"\0" * 100)
    failed = run_cli("gui", "--self-test", "--model", str(bundle), env=env)
    lines = failed.stderr.decode().strip().splitlines()
    assert failed.returncode == 1 and failed.stdout == b""
    assert lines[-1].startswith("self-test failed: ") and str(bundle) in lines[-1]
    assert not any("Traceback" in line for line in lines)


def test_without_a_desktop_session_the_app_says_so_and_the_self_test_runs_offscreen(tmp_path):
    """No DISPLAY, no WAYLAND_DISPLAY: Qt would abort and suggest reinstalling. The app says
    what is wrong in one line (exit 2); --self-test needs no screen and runs offscreen."""
    from .conftest import ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "c"), XDG_DATA_HOME=str(tmp_path / "d"))
    env.pop("EDGE_TRANSLATOR_MODEL", None)
    command = [sys.executable, "-m", "edge_translator.gui.app"]
    plain = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert plain.returncode == 2 and plain.stdout == ""
    assert plain.stderr.count("\n") == 1 and "DISPLAY" in plain.stderr and "edge-translator" in plain.stderr
    checked = subprocess.run(command + ["--self-test", "I like tea."], capture_output=True, text=True, env=env,
                             cwd=ROOT, timeout=300)
    assert checked.returncode == 0, checked.stderr
    assert CJK.search(checked.stdout)


def test_missing_display_is_only_reported_where_qt_needs_one():
    assert gui_app.missing_display({}, "linux")
    assert gui_app.missing_display({"DISPLAY": ":0"}, "linux") is None
    assert gui_app.missing_display({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert gui_app.missing_display({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert gui_app.missing_display({}, "win32") is None and gui_app.missing_display({}, "darwin") is None
