"""The app's preferences: a frozen :class:`Settings`, read from and written to ``QSettings``.

Values come back from a settings store as whatever its backend kept (strings in an INI
file, ``QByteArray`` for bytes, numbers in the registry), and a user may have edited the
file by hand, so :func:`load` coerces each value and falls back to the default for
anything it cannot read, instead of failing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from PySide6.QtCore import QByteArray, QSettings

logger = logging.getLogger(__name__)

ORGANIZATION = "edge-translator"
APPLICATION = "edge-translator"
#: Most ONNX Runtime threads accepted from the store; anything above is treated as garbage.
MAX_THREADS = 256

_KEYS = ("threads", "variant", "as_you_type", "output_folder", "open_folder", "model", "geometry", "copy_result",
         "close_to_tray", "keep_history", "global_shortcut",
         "watch_clipboard")


@dataclass(frozen=True)
class Settings:
    """What the app remembers between runs."""

    threads: int | None = None
    """ONNX Runtime intra-op threads; ``None`` means the core's default (physical cores)."""
    variant: str | None = None
    """Target variant (``"zh-Hans"``, ``"zh-Hant"``); ``None`` means the model's default."""
    as_you_type: bool = True
    """Translate the source pane a moment after typing stops."""
    output_folder: str | None = None
    """Where translated documents go; ``None`` means next to each input."""
    open_folder: str | None = None
    """The folder the last "Open documents…" dialog showed."""
    model: str | None = None
    """The bundle directory to load; ``None`` means the core's lookup (env, then embedded)."""
    geometry: bytes | None = None
    """The main window's saved geometry (``QWidget.saveGeometry``)."""
    copy_result: bool = False
    """Put the translation of the clipboard or the selection (``gui --clipboard``, the tray,
    the shortcut) on the clipboard when it is done."""
    close_to_tray: bool = False
    """Closing the window hides it in the tray (where the desktop has one) instead of quitting."""
    keep_history: bool = True
    """Store what the window translates in the translation memory (its History tab)."""
    global_shortcut: str | None = None
    """Keys that translate the selection from any program (``ctrl+alt+e``); ``None``: none."""
    watch_clipboard: bool = False
    """Translate what other programs copy (:mod:`.clipwatch`)."""


def default_qsettings() -> QSettings:
    """The user's settings store (organization and application "edge-translator")."""
    return QSettings(ORGANIZATION, APPLICATION)


def _text(value) -> str | None:
    if isinstance(value, str):
        value = value.strip()
        return value or None
    return None


def _threads(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 1 <= value <= MAX_THREADS:
        return value
    return None


def _flag(value, default: bool) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
    return default


def _bytes(value) -> bytes | None:
    if isinstance(value, QByteArray):
        value = value.data()
    if isinstance(value, (bytes, bytearray)) and value:
        return bytes(value)
    return None


def load(qsettings: QSettings) -> Settings:
    """Read the settings, using the default for every value that is missing or unreadable.

    Args:
        qsettings: The store (:func:`default_qsettings`, or an INI file in tests).

    Returns:
        The settings.
    """
    defaults = Settings()

    def value(key: str):
        try:
            return qsettings.value(key)
        except Exception:  # noqa: BLE001 - a store we cannot decode is as good as empty
            logger.warning("settings: cannot read %r; using the default", key)
            return None

    return Settings(
        threads=_threads(value("threads")),
        variant=_text(value("variant")),
        as_you_type=_flag(value("as_you_type"), defaults.as_you_type),
        output_folder=_text(value("output_folder")),
        open_folder=_text(value("open_folder")),
        model=_text(value("model")),
        geometry=_bytes(value("geometry")),
        copy_result=_flag(value("copy_result"), defaults.copy_result),
        close_to_tray=_flag(value("close_to_tray"), defaults.close_to_tray),
        keep_history=_flag(value("keep_history"), defaults.keep_history),
        global_shortcut=_text(value("global_shortcut")),
        watch_clipboard=_flag(value("watch_clipboard"), defaults.watch_clipboard),
    )


def save(settings: Settings, qsettings: QSettings) -> None:
    """Write every field; a ``None`` field removes its key, so the default applies next time.

    Args:
        settings: What to remember.
        qsettings: The store to write to (synced before returning).
    """
    for key in _KEYS:
        value = getattr(settings, key)
        if value is None:
            qsettings.remove(key)
        elif key == "geometry":
            qsettings.setValue(key, QByteArray(value))
        else:
            qsettings.setValue(key, value)
    qsettings.sync()
