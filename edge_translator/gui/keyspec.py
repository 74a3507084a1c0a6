"""A global shortcut as written by a person (``ctrl+alt+e``, ``<Ctrl><Alt>e``) and as data.

:func:`parse_keys` turns the forms people copy from their desktop's settings, from Qt or
from another app into :class:`Keys`; the platform backends (:mod:`.x11keys`,
:mod:`.winkeys`) map its names to their own codes. No Qt here, so a setting can be
checked where no display is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import EdgeTranslatorError

#: The modifiers, in the order :class:`Keys` writes them.
MODIFIERS = ("ctrl", "alt", "shift", "super")

_MODIFIER_NAMES = {
    "ctrl": "ctrl", "control": "ctrl", "ctl": "ctrl", "primary": "ctrl",
    "alt": "alt", "option": "alt", "opt": "alt",
    "shift": "shift",
    "super": "super", "meta": "super", "win": "super", "windows": "super", "logo": "super",
}

#: Named keys other than letters, digits and F-keys: their canonical name, and the other
#: spellings people write for them (X keysym names, Qt's names, short forms).
_NAMED_KEYS = {
    "space": ("spc",), "enter": ("return",), "escape": ("esc",), "tab": (), "backspace": (),
    "delete": ("del",), "insert": ("ins",), "home": (), "end": (),
    "pageup": ("pgup", "page_up", "prior"), "pagedown": ("pgdown", "pgdn", "page_down", "next"),
    "up": (), "down": (), "left": (), "right": (), "print": ("printscreen", "prtsc"), "pause": (),
    "comma": (",",), "period": (".",), "slash": ("/",), "semicolon": (";",), "apostrophe": ("'",),
    "bracketleft": ("[",), "bracketright": ("]",), "minus": ("-",), "equal": ("=",),
    "grave": ("`",), "backslash": ("\\",),
}
_KEY_ALIASES = {alias: name for name, aliases in _NAMED_KEYS.items() for alias in (name, *aliases)}
NAMED_KEYS = tuple(_NAMED_KEYS)
"""Every named key :func:`parse_keys` accepts, by its canonical name."""

_EXAMPLE = "write one such as ctrl+alt+e"
_FKEY = re.compile(r"f([1-9]|1[0-9]|2[0-4])")


class ShortcutError(EdgeTranslatorError):
    """A global shortcut cannot be used: a bad spec, a combination another program holds,
    or a desktop that lets no program take one. The message is one line and says what to do."""


def bind_advice(where: str) -> str:
    """What a refusal says to do instead: bind the app's command in ``where``.

    Here, not in :mod:`.globalkeys`, because the Wayland backend (:mod:`.portalkeys`) says
    it too, and globalkeys imports that backend.
    """
    return (f"bind `edge-translator gui --selection` (or `--clipboard`) to it in {where} "
            "(docs/desktop.md, 'A global shortcut')")


@dataclass(frozen=True)
class Keys:
    """A key combination: modifiers held and one key pressed."""

    modifiers: frozenset[str]
    """Held modifiers, a subset of ``{"ctrl", "alt", "shift", "super"}``."""
    key: str
    """The key pressed, by canonical name: ``"e"``, ``"7"``, ``"f9"``, ``"space"``, ``"pageup"``."""

    def __str__(self) -> str:
        return "+".join([m for m in MODIFIERS if m in self.modifiers] + [self.key])

    @property
    def is_function_key(self) -> bool:
        """Whether the key is F1 to F24, the keys that may be taken without a modifier."""
        return _FKEY.fullmatch(self.key) is not None


def parse_keys(text: str) -> Keys:
    """Read a shortcut written as ``ctrl+alt+e``, ``Ctrl + Alt + E``, ``<Ctrl><Alt>e``
    (GNOME), ``Control+Alt+E`` or ``Super+F9``.

    Case does not matter; ``meta``, ``win`` and ``super`` are the same modifier (the
    Windows/logo key). A key without a modifier is refused unless it is an F-key, and so
    is shift as the only modifier: either would take a key that people type in every
    other program.

    Args:
        text: The shortcut as written in settings or on the command line.

    Returns:
        The combination.

    Raises:
        ShortcutError: With one line naming what is wrong and a good example.
    """
    spec = text.strip()
    if not spec:
        raise ShortcutError(f"the global shortcut is empty: {_EXAMPLE}")
    parts = _split(spec)
    modifiers: set[str] = set()
    keys: list[str] = []
    for part in parts:
        name = part.lower()
        if name in _MODIFIER_NAMES:
            modifiers.add(_MODIFIER_NAMES[name])
        elif len(name) == 1 and (name.isascii() and name.isalnum()):
            keys.append(name)
        elif _FKEY.fullmatch(name):
            keys.append(name)
        elif name in _KEY_ALIASES:
            keys.append(_KEY_ALIASES[name])
        else:
            raise ShortcutError(f"unknown key {part!r} in the shortcut {spec!r}: {_EXAMPLE} (keys: a-z, 0-9, "
                                f"f1-f24, space, enter, tab, arrows...; modifiers: ctrl, alt, shift, super)")
    if not keys:
        raise ShortcutError(f"the shortcut {spec!r} has no key after its modifiers: {_EXAMPLE}")
    if len(keys) > 1:
        raise ShortcutError(f"the shortcut {spec!r} has {len(keys)} keys ({', '.join(keys)}); a shortcut is "
                            f"modifiers and one key: {_EXAMPLE}")
    combination = Keys(frozenset(modifiers), keys[0])
    if not combination.is_function_key and not (modifiers - {"shift"}):
        what = "only shift as its modifier" if modifiers else "no modifier"
        raise ShortcutError(f"the shortcut {spec!r} has {what}: it would take that key from every program; "
                            f"{_EXAMPLE} (an F-key such as f9 may be alone)")
    return combination


def _split(spec: str) -> list[str]:
    """The parts of a spec: ``<Ctrl><Alt>e`` (GNOME) or ``ctrl+alt+e``, spaces ignored."""
    if spec.startswith("<"):
        parts = re.findall(r"<([^<>]*)>", spec)
        rest = re.sub(r"<[^<>]*>", "", spec).strip()
        if "<" in rest or ">" in rest or any(not p.strip() for p in parts):
            raise ShortcutError(f"the shortcut {spec!r} has an unclosed or empty <...>: write one such as "
                                "<Ctrl><Alt>e or ctrl+alt+e")
        return [p.strip() for p in parts] + ([rest] if rest else [])
    parts = [p.strip() for p in spec.split("+")]
    if any(not p for p in parts):
        raise ShortcutError(f"the shortcut {spec!r} has an empty part between its '+': {_EXAMPLE}")
    return parts
