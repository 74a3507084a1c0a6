"""Batch translation of documents: formats in and out, the resumable job, memory and glossary.

Each format lives in its own module behind one interface (:mod:`.base`); :func:`formats`
maps a file suffix to it. The formats' libraries (python-docx, python-pptx, markdown-it-py; lxml for .xlsx;
pikepdf, pdfminer.six and reportlab for PDF in the extra ``pdf``) come with
the extra ``docs`` and are imported only when a file of that kind is opened.
"""

from __future__ import annotations

from .base import FormatInfo

#: Every format, the suffixes it reads, its module and the extra its library comes in.
FORMATS = (
    FormatInfo("text", (".txt",), "plaintext"),
    FormatInfo("markdown", (".md", ".markdown"), "markdown", "docs"),
    FormatInfo("srt", (".srt",), "subtitles"),
    FormatInfo("vtt", (".vtt",), "subtitles"),
    FormatInfo("html", (".html", ".htm", ".xhtml"), "htmldoc"),
    FormatInfo("docx", (".docx",), "word", "docs", ("Word .docx file", "word/document.xml")),
    FormatInfo("pptx", (".pptx", ".pptm"), "slides", "docs", ("PowerPoint .pptx file", "ppt/presentation.xml")),
    FormatInfo("xlsx", (".xlsx", ".xlsm"), "sheets", "docs", ("Excel .xlsx file", "xl/workbook.xml")),
    FormatInfo("odf", (".odt", ".odp", ".ods"), "opendoc", "docs", ("OpenDocument file", "content.xml")),
    FormatInfo("epub", (".epub",), "epub", "docs", ("EPUB file", "META-INF/container.xml")),
    FormatInfo("pdf", (".pdf",), "pdf", "pdf", magic=b"%PDF-"),
    FormatInfo("csv", (".csv",), "table"),
    FormatInfo("tsv", (".tsv", ".tab"), "table"),
)

_OBJECTS = {"srt": "SRT", "vtt": "VTT", "csv": "CSV", "tsv": "TSV"}


def format_for(path) -> FormatInfo | None:
    """The format that reads ``path`` by its suffix (case-insensitive), or ``None``."""
    suffix = str(path).lower().rsplit(".", 1)
    if len(suffix) < 2:
        return None
    for info in FORMATS:
        if "." + suffix[1] in info.suffixes:
            return info
    return None


def load_format(info: FormatInfo):
    """The format object of ``info``, importing its module (and its library) now.

    Raises:
        MissingDependencyError: If the format's library is not installed.
    """
    import importlib

    from ..core.errors import MissingDependencyError

    try:
        module = importlib.import_module(f"{__name__}.{info.module}")
    except ImportError as exc:
        raise MissingDependencyError(
            f"{info.name} files need a library that is not installed: run "
            f"`pip install 'edge-translator[{info.extra or 'docs'}]'` ({exc})") from None
    return getattr(module, _OBJECTS.get(info.name, "FORMAT"))
