"""The dictionary's entries under the translation of a lone word or short term.

Shown when the text translated is one word or a term of up to three words that the
English→Chinese dictionary knows: each entry's headword (in the chosen script), its
pinyin and its glosses, best first. Hidden otherwise, and as soon as the text changes.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

#: Entries shown at most; the rest are counted.
MAX_SHOWN = 8


class EntriesView(QLabel):
    """A read-only list of dictionary entries (rich text, selectable)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setAccessibleName("Dictionary entries")
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setWordWrap(True)
        self.entries: list = []
        """What is shown now: :class:`~edge_translator.core.dictionary.DictionaryEntry` s."""
        self.setVisible(False)

    def show_entries(self, term: str, entries: list, target: str | None) -> None:
        """Show ``entries`` of ``term`` (headwords in ``target``'s script); none hides the view."""
        self.entries = list(entries)
        if not self.entries:
            self.clear_entries()
            return
        rows = []
        for entry in self.entries[:MAX_SHOWN]:
            rows.append(f"<b>{html.escape(entry.headword(target or 'zh-Hans'))}</b> "
                        f"<i>{html.escape(entry.pinyin)}</i> — {html.escape('; '.join(entry.glosses))}")
        more = len(self.entries) - MAX_SHOWN
        if more > 0:
            rows.append(f"… and {more} more")
        self.setText(f"Dictionary: <b>{html.escape(term.strip())}</b><br>" + "<br>".join(rows))
        self.setVisible(True)

    def clear_entries(self) -> None:
        self.entries = []
        self.clear()
        self.setVisible(False)
