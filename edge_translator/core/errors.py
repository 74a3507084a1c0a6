"""Error hierarchy of edge-translator: every failure a user can act on is one of these.

Messages name the file, the field and the fix, so that a front end can print
``str(error)`` as one line and exit with :attr:`EdgeTranslatorError.exit_code`.
"""

from __future__ import annotations


class EdgeTranslatorError(Exception):
    """Base class of the errors that edge-translator reports to users."""

    exit_code = 1


class BundleError(EdgeTranslatorError):
    """A model bundle is missing, corrupt, of an unknown format or inconsistent."""

    exit_code = 3


class InputError(EdgeTranslatorError):
    """The text or file given to translate cannot be used (for example invalid UTF-8)."""

    exit_code = 4


class ExportError(EdgeTranslatorError):
    """Export, quantization or validation of a model failed."""

    exit_code = 5


class MissingDependencyError(EdgeTranslatorError):
    """An optional dependency is needed for this action; the message names the extra."""

    exit_code = 6


def require(module: str, extra: str):
    """Import an optional dependency, or explain which extra to install.

    Args:
        module: The module to import, e.g. ``"torch"``.
        extra: The pip extra that provides it, e.g. ``"export"``.

    Returns:
        The imported module.

    Raises:
        MissingDependencyError: If the module is not installed.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{module} is needed for this command but is not installed: "
            f"run `pip install 'edge-translator[{extra}]'` ({exc})"
        ) from None


class NoSpace(EdgeTranslatorError):
    """A write failed because its disk is full: the message names the file, the disk and
    its free space (:func:`~.diskspace.no_space`). What was finished is kept."""

    exit_code = 9

    def __init__(self, message: str, path=None):
        super().__init__(message)
        self.path = path
        """The file that could not be written."""


class Busy(EdgeTranslatorError):
    """The translation queue is full and the caller asked not to wait."""

    exit_code = 75  # EX_TEMPFAIL: try again later


class EngineClosed(EdgeTranslatorError):
    """The translator was closed; no more work is taken."""


class TranslationFailed(EdgeTranslatorError):
    """The runtime failed while decoding a batch; only that batch's submissions fail."""
