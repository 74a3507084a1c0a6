"""The headless daemon: LibreTranslate, DeepL and our own HTTP APIs over one shared engine.

Start it with ``edge-translator serve`` (see :mod:`.server`); the WSGI application is
:class:`.app.App`. Needs the ``serve`` extra (waitress, prometheus-client).
"""
