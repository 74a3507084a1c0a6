"""The History tab over the translation memory, offscreen on the demo model: it lists what the
window translated, searches, copies, deletes, clears after asking, and keeps nothing when
told so."""

from __future__ import annotations

import os
import re
from types import SimpleNamespace

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtGui import QGuiApplication  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402

from edge_translator.core.cache import ChainedCache, LRUCache  # noqa: E402
from edge_translator.core.memory import TranslationMemory  # noqa: E402
from edge_translator.gui import settings as store  # noqa: E402
from edge_translator.gui.history import HistoryGate  # noqa: E402
from edge_translator.gui.session import ModelSession  # noqa: E402
from edge_translator.gui.settings import Settings  # noqa: E402
from edge_translator.gui.window import MainWindow  # noqa: E402

from .conftest import ROOT  # noqa: E402

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def answers(monkeypatch):
    """Message boxes answered from this list (the button's text), and recorded."""
    given = SimpleNamespace(next=[], seen=[])

    def fake_exec(box):
        given.seen.append(box.text())
        wanted = given.next.pop(0) if given.next else None
        for button in box.buttons():
            if button.text() == wanted:
                button.click()
        return 0
    monkeypatch.setattr(QMessageBox, "exec", fake_exec)
    return given


@pytest.fixture
def app_parts(qtbot, tmp_path, answers):
    """A window whose session stores in a memory of its own, as the app builds it."""
    memory = TranslationMemory(tmp_path / "memory.sqlite")
    gate = HistoryGate(memory)
    session = ModelSession(memory=ChainedCache(LRUCache(64), gate))
    session.load_now(ROOT / "models" / "tatoeba-en-zh-small")
    qsettings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    window = MainWindow(session, Settings(as_you_type=False), qsettings, history=gate)
    qtbot.addWidget(window)
    window.show()
    yield SimpleNamespace(window=window, memory=memory, gate=gate, session=session)
    window.pane.stream.cancel()
    qtbot.waitUntil(lambda: not window.pane.stream.active, timeout=5000)
    session.close()
    memory.close()


def translate(qtbot, window, text: str) -> None:
    window.pane.source.setPlainText(text)
    with qtbot.waitSignal(window.pane.translation_finished, timeout=20000):
        window.pane.translate()


def rows(panel) -> list[tuple[str, str]]:
    return [(panel.table.item(r, 0).text(), panel.table.item(r, 1).text()) for r in range(panel.table.rowCount())]


def test_the_tab_lists_what_was_translated_newest_first_and_searches(qtbot, app_parts):
    window, panel = app_parts.window, app_parts.window.history
    translate(qtbot, window, "Where is the train station?")
    translate(qtbot, window, "The red lamp is broken.")
    window.tabs.setCurrentWidget(panel)
    listed = rows(panel)
    assert [source for source, _ in listed] == ["The red lamp is broken.", "Where is the train station?"]
    assert all(CJK.search(text) for _, text in listed)
    panel.search.setText("lamp")
    qtbot.waitUntil(lambda: panel.table.rowCount() == 1, timeout=5000)
    assert rows(panel)[0][0] == "The red lamp is broken."
    panel.search.setText(listed[1][1][:2])  # the Chinese side is searched too
    qtbot.waitUntil(lambda: rows(panel) and rows(panel)[0][0] == "Where is the train station?", timeout=5000)
    panel.search.setText("100%")  # SQL's wildcards are letters here
    qtbot.waitUntil(lambda: panel.table.rowCount() == 0, timeout=5000)
    assert "0 entries matching" in panel.note.text()


def test_copy_delete_and_a_new_translation_shows_while_the_tab_is_open(qtbot, app_parts):
    window, panel = app_parts.window, app_parts.window.history
    translate(qtbot, window, "Where is the train station?")
    window.tabs.setCurrentWidget(panel)
    assert not panel.copy_button.isEnabled() and not panel.delete_button.isEnabled()
    panel.table.selectRow(0)
    panel.copy_button.click()
    assert QGuiApplication.clipboard().text() == rows(panel)[0][1]
    translate(qtbot, window, "The red lamp is broken.")  # finished while the tab shows: listed
    assert rows(panel)[0][0] == "The red lamp is broken."
    panel.table.selectRow(0)
    panel.delete_button.click()
    assert [source for source, _ in rows(panel)] == ["Where is the train station?"]
    assert {e.source for e in app_parts.memory.entries()} == {"Where is the train station?"}


def test_clear_all_asks_first(qtbot, app_parts, answers):
    window, panel = app_parts.window, app_parts.window.history
    translate(qtbot, window, "Where is the train station?")
    window.tabs.setCurrentWidget(panel)
    answers.next = ["Cancel"]
    panel.clear_button.click()
    assert app_parts.memory.stats().entries == 1 and answers.seen == ["Forget every translation in the "
                                                                       "translation memory?"]
    answers.next = ["Clear all"]
    panel.clear_button.click()
    assert app_parts.memory.stats().entries == 0 and panel.table.rowCount() == 0


def test_keep_no_history_stores_nothing_and_is_remembered(qtbot, app_parts):
    window, panel = app_parts.window, app_parts.window.history
    panel.keep_box.setChecked(False)
    assert window.settings.keep_history is False and app_parts.gate.keep is False
    translate(qtbot, window, "This is my private letter.")
    assert app_parts.memory.stats().entries == 0
    window.save_settings()
    assert store.load(window.qsettings).keep_history is False
    panel.keep_box.setChecked(True)
    translate(qtbot, window, "This is a public notice.")
    assert [e.source for e in app_parts.memory.entries()] == ["This is a public notice."]


def test_without_a_memory_the_tab_says_so(qtbot, tmp_path):
    session = ModelSession()
    window = MainWindow(session, Settings(), QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(window)
    panel = window.history
    window.tabs.setCurrentWidget(panel)
    assert "without the translation memory" in panel.note.text()
    assert not panel.search.isEnabled() and not panel.clear_button.isEnabled() and panel.table.rowCount() == 0
    session.close()
