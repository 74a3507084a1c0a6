"""Model → Add…: ask for any source ``edge-translator models add`` takes, and the name.

The source is a Hugging Face hub id, an https URL, or a path: a bundle folder, a Hugging
Face MarianMT folder, a Marian release folder or ``.zip``, or a ``.tar`` made by
``models pack``. The dialog only asks; :class:`~.models.ModelsDialog` does the adding.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Slot
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

#: What the source field says it takes.
SOURCES_HINT = ("A Hugging Face model id (Helsinki-NLP/opus-mt-en-zh), an https address, a model folder "
                "(a bundle, a Hugging Face folder, a Marian release), a release .zip or a packed .tar. "
                "Converting needs the convert extra; nothing is left behind if it fails.")


class AddModelDialog(QDialog):
    """After ``exec()`` returns Accepted, :meth:`source` and :meth:`name` say what to add."""

    def __init__(self, parent: QWidget | None = None, start: Path | None = None):
        super().__init__(parent)
        self.start = Path(start) if start else Path.home()
        self.setWindowTitle("Add a model")
        self.setAccessibleName("Add a model")
        layout = QVBoxLayout(self)
        hint = QLabel(SOURCES_HINT)
        hint.setWordWrap(True)
        layout.addWidget(hint)
        form = QFormLayout()
        row = QHBoxLayout()
        self.source_edit = QLineEdit()
        self.source_edit.setAccessibleName("Model source")
        self.source_edit.setPlaceholderText("Helsinki-NLP/opus-mt-en-zh, a folder, a .zip or a .tar")
        self.source_edit.textChanged.connect(self._update)
        row.addWidget(self.source_edit, 1)
        self.folder_button = QPushButton("&Folder…")
        self.folder_button.setAccessibleName("Choose a model folder")
        self.folder_button.clicked.connect(self.choose_folder)
        row.addWidget(self.folder_button)
        self.file_button = QPushButton("F&ile…")
        self.file_button.setAccessibleName("Choose a release .zip or a packed .tar")
        self.file_button.clicked.connect(self.choose_file)
        row.addWidget(self.file_button)
        form.addRow("&Source:", row)
        self.name_edit = QLineEdit()
        self.name_edit.setAccessibleName("Installed model name")
        self.name_edit.setPlaceholderText("from the source")
        self.name_edit.setToolTip("The folder name in your models folder, and the name --model takes")
        form.addRow("&Name:", self.name_edit)
        layout.addLayout(form)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText("&Add")
        self.ok_button.setAccessibleName("Add the model")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self.resize(620, 180)
        self._update()

    def source(self) -> str:
        """The source as typed or chosen, stripped."""
        return self.source_edit.text().strip()

    def name(self) -> str | None:
        """The name asked for, or ``None`` for the source's own."""
        return self.name_edit.text().strip() or None

    @Slot()
    def _update(self) -> None:
        self.ok_button.setEnabled(bool(self.source()))

    @Slot()
    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Model folder", str(self.start))
        if folder:
            self.source_edit.setText(folder)

    @Slot()
    def choose_file(self) -> None:
        file, _ = QFileDialog.getOpenFileName(self, "Release .zip or packed .tar", str(self.start),
                                              "Models (*.zip *.tar);;All files (*)")
        if file:
            self.source_edit.setText(file)
