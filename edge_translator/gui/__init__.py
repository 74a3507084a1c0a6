"""The desktop app (PySide6): a window to paste text into and to drop documents on.

Only the front end lives here; every translation goes through the core's public engine
(:meth:`Translator.submit`) and the document job. Importing this package imports no Qt:
each module imports PySide6 itself, and :func:`edge_translator.gui.app.main` is the entry point.
"""
