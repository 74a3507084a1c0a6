"""The History tab: what was translated, from the translation memory, and the switch that keeps none.

The history is the translation memory the window shares with ``docs`` and ``serve --tm``
(one entry per sentence: its English, its translation, when). The tab lists the newest
entries, searches the English and the Chinese, copies a translation, deletes one entry or
clears them all. "Keep a history" off (for private text) stops the window from storing
what it translates, from then on; what it finds in the memory is still reused.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
                               QMessageBox, QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from ..core.errors import EdgeTranslatorError
from . import clipwatch
from .dialogs import ask

#: Entries the tab lists, newest first.
SHOWN = 200


class HistoryGate:
    """The translation memory as the window's cache, storing only while :attr:`keep` is on."""

    def __init__(self, memory, keep: bool = True):
        self.memory = memory
        self.keep = keep

    def get(self, key):
        return self.memory.get(key)

    def put(self, key, value) -> None:
        if self.keep:
            self.memory.put(key, value)


class HistoryPanel(QWidget):
    """The list, its search and its buttons."""

    keep_changed = Signal(bool)
    """The user turned "Keep a history" on or off, to remember it."""
    message = Signal(str, int)
    """A line for the status bar and how many milliseconds it stays."""

    def __init__(self, gate: HistoryGate | None, parent: QWidget | None = None):
        """Args:
            gate: The window's memory, or ``None`` when it runs without one (``--no-tm``, or
                the memory could not be opened): the tab then says so.
            parent: The Qt parent.
        """
        super().__init__(parent)
        self.gate = gate
        self.entries: list = []
        self.setAccessibleName("History")
        layout = QVBoxLayout(self)
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search the English or the translation")
        self.search.setAccessibleName("Search the history")
        self.search.setClearButtonEnabled(True)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(200)
        self._search_timer.timeout.connect(self.refresh)
        self.search.textChanged.connect(lambda _: self._search_timer.start())
        self.table = QTableWidget(0, 3, self)
        self.table.setAccessibleName("Translations")
        self.table.setHorizontalHeaderLabels(["English", "Translation", "When"])
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.table.doubleClicked.connect(lambda _: self.copy_selected())
        self.copy_button = QPushButton("&Copy translation", self)
        self.copy_button.setAccessibleName("Copy translation")
        self.copy_button.clicked.connect(self.copy_selected)
        self.delete_button = QPushButton("De&lete", self)
        self.delete_button.setAccessibleName("Delete")
        self.delete_button.clicked.connect(self.delete_selected)
        self.clear_button = QPushButton("C&lear all…", self)
        self.clear_button.setAccessibleName("Clear all")
        self.clear_button.clicked.connect(self.clear_all)
        self.keep_box = QCheckBox("&Keep a history of what I translate", self)
        self.keep_box.setAccessibleName("Keep a history")
        self.keep_box.setChecked(gate is not None and gate.keep)
        self.keep_box.toggled.connect(self._on_keep)
        self.note = QLabel(self)
        self.note.setAccessibleName("About the history")
        self.note.setWordWrap(True)
        buttons = QHBoxLayout()
        for widget in (self.copy_button, self.delete_button, self.clear_button):
            buttons.addWidget(widget)
        buttons.addStretch(1)
        buttons.addWidget(self.keep_box)
        layout.addWidget(self.search)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        layout.addWidget(self.note)
        if gate is None:
            self.note.setText("There is no history: the app runs without the translation memory (--no-tm, or it "
                              "could not be opened).")
            for widget in (self.search, self.table, self.clear_button, self.keep_box):
                widget.setEnabled(False)
        self._update_buttons()

    def refresh(self) -> None:
        """List the newest entries that match the search."""
        if self.gate is None:
            return
        try:
            self.entries = self.gate.memory.recent(SHOWN, self.search.text())
        except EdgeTranslatorError as exc:
            self.message.emit(f"The history cannot be read: {exc}", 10000)
            self.entries = []
        self.table.setRowCount(len(self.entries))
        for row, entry in enumerate(self.entries):
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.created))
            for column, text in enumerate((entry.source, entry.text, when)):
                item = QTableWidgetItem(text)
                item.setToolTip(text if column < 2 else "")
                self.table.setItem(row, column, item)
        shown = f"{len(self.entries)} most recent" if len(self.entries) == SHOWN else f"{len(self.entries)}"
        self.note.setText(f"{shown} entries{' matching' if self.search.text().strip() else ''}, from "
                          f"{self.gate.memory.path} (shared with `edge-translator docs`)")
        self._update_buttons()

    def _selected(self) -> list:
        rows = sorted({index.row() for index in self.table.selectionModel().selectedRows()})
        return [self.entries[row] for row in rows if row < len(self.entries)]

    def _update_buttons(self) -> None:
        chosen = bool(self.gate is not None and self._selected())
        self.copy_button.setEnabled(chosen)
        self.delete_button.setEnabled(chosen)

    def copy_selected(self) -> None:
        """Put the selected translations on the clipboard, one per line."""
        chosen = self._selected()
        if chosen:
            clipwatch.write("\n".join(entry.text for entry in chosen))
            self.message.emit("Translation copied", 3000)

    def delete_selected(self) -> None:
        """Forget the selected entries."""
        chosen = self._selected()
        try:
            for entry in chosen:
                self.gate.memory.delete(entry)
        except EdgeTranslatorError as exc:
            self.message.emit(f"Not deleted: {exc}", 10000)
        self.refresh()

    def clear_all(self) -> None:
        """Empty the translation memory, after asking."""
        choice = ask(self.window(), QMessageBox.Icon.Warning, "Clear the history",
                     "Forget every translation in the translation memory?",
                     [("Cancel", QMessageBox.ButtonRole.RejectRole),
                      ("Clear all", QMessageBox.ButtonRole.DestructiveRole)],
                     details=f"This empties {self.gate.memory.path}, which `edge-translator docs` and "
                             "`serve --tm` share: they will translate those sentences again.")
        if choice != "Clear all":
            return
        try:
            count = self.gate.memory.clear()
        except EdgeTranslatorError as exc:
            self.message.emit(f"Not cleared: {exc}", 10000)
            return
        self.message.emit(f"Cleared {count} entries", 5000)
        self.refresh()

    def _on_keep(self, checked: bool) -> None:
        if self.gate is not None:
            self.gate.keep = checked
        self.keep_changed.emit(bool(checked))
