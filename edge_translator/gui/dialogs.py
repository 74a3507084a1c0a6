"""Modal questions: a message box whose buttons are named by what they do."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget


def ask(parent: QWidget | None, icon: QMessageBox.Icon, title: str, text: str, buttons: list[tuple[str, object]],
        details: str | None = None) -> str | None:
    """Show a modal message box and return the label of the button chosen.

    Args:
        parent: The window the box belongs to.
        icon: ``QMessageBox.Icon.Warning`` and the like.
        title: The box's title.
        text: What happened, in a sentence or two.
        buttons: ``(label, QMessageBox.ButtonRole)`` pairs, the first being the default.
        details: A longer explanation, shown under the text.

    Returns:
        The chosen button's label, or ``None`` if the box was closed otherwise.
    """
    box = QMessageBox(icon, title, text, QMessageBox.StandardButton.NoButton, parent)
    box.setAccessibleName(title)
    if details:
        box.setInformativeText(details)
    labels = {}
    for n, (label, role) in enumerate(buttons):
        button = box.addButton(label, role)
        button.setAccessibleName(label.replace("&", ""))
        labels[id(button)] = label
        if n == 0:
            box.setDefaultButton(button)
    box.exec()
    clicked = box.clickedButton()
    return labels.get(id(clicked)) if clicked is not None else None
