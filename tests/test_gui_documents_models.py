"""The documents panel and the models dialog, offscreen, with the embedded demo model."""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl  # noqa: E402
from PySide6.QtGui import QDragEnterEvent, QDropEvent  # noqa: E402
from PySide6.QtWidgets import QDialog, QFileDialog, QPushButton  # noqa: E402

from edge_translator.core.translator import DEFAULT_MODEL, ENV_MODEL, models_dir  # noqa: E402
from edge_translator.gui.documents import STATUS, DocumentsPanel  # noqa: E402
from edge_translator.gui.models import ModelsDialog, find_bundles  # noqa: E402
from edge_translator.gui.session import ModelSession  # noqa: E402
from edge_translator.gui.settings import Settings  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

EMBEDDED = models_dir() / DEFAULT_MODEL
CJK = re.compile(r"[\u4e00-\u9fff]")
WAIT = 30000


@pytest.fixture(scope="module")
def session(qapp):
    session = ModelSession()
    session.load_now(EMBEDDED, threads=1)
    yield session
    session.close()


class Panel(DocumentsPanel):
    """The panel with its dialogs and the desktop intercepted."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.opened: list[Path] = []
        self.errors: list[tuple[str, str]] = []

    def open_result(self, path):
        self.opened.append(Path(path))

    def show_error(self, title, text):
        self.errors.append((title, text))


def settings(output_folder: str | None = None) -> Settings:
    return Settings(variant="zh-Hans", output_folder=output_folder)


@pytest.fixture
def panel(qtbot, session):
    widget = Panel(session, settings())
    qtbot.addWidget(widget)
    yield widget
    widget.shutdown()
    qtbot.waitUntil(lambda: not widget.busy, timeout=WAIT)


def sentences(tag: str, count: int) -> list[str]:
    """Distinct short sentences (the module's cache never answers for them)."""
    return [f"Tom has {tag} {n} red apples in his house." for n in range(count)]


def status(panel: DocumentsPanel, path: Path) -> str:
    row = panel.row(path)
    assert row is not None, f"no row for {path}"
    return row.text(STATUS)


def drop(panel: DocumentsPanel, *paths: Path) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    enter = QDragEnterEvent(QPoint(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    panel.dragEnterEvent(enter)
    assert enter.isAccepted()
    event = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)
    panel.dropEvent(event)


def write_srt(path: Path, lines: list[str]) -> None:
    cues = [f"{i}\n00:00:0{i},000 --> 00:00:0{i},900\n{line}\n" for i, line in enumerate(lines, 1)]
    path.write_text("\n".join(cues), encoding="utf-8")


# -- the documents panel ---------------------------------------------------------------------


def test_dropped_folder_translates_and_opens(qtbot, panel, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "notes.txt").write_text("\n\n".join(sentences("drop", 4)), encoding="utf-8")
    write_srt(folder / "film.srt", ["I love you.", "Where is the station?"])
    values: list[int] = []
    panel.progress.valueChanged.connect(values.append)
    with qtbot.waitSignal(panel.busy_changed, timeout=WAIT) as started:
        drop(panel, folder)
    assert started.args == [True]
    qtbot.waitUntil(lambda: not panel.busy, timeout=WAIT)

    for name in ("notes.txt", "film.srt"):
        assert status(panel, folder / name) == "done"
        bar = panel.row_progress(panel.row(folder / name))
        assert bar.maximum() > 0 and bar.value() == bar.maximum()
    assert panel.progress.value() == panel.progress.maximum() > 1
    assert len(set(values)) >= 4 and values == sorted(values)  # it advanced sentence by sentence
    text = (folder / "notes.zh-Hans.txt").read_text(encoding="utf-8")
    subtitles = (folder / "film.zh-Hans.srt").read_text(encoding="utf-8")
    assert CJK.search(text) and CJK.search(subtitles)
    assert "00:00:02,000 --> 00:00:02,900" in subtitles
    assert panel.row(folder) is None  # the folder's placeholder row gave way to its files
    assert panel.summary_label.text().startswith("2 done, 0 failed, 0 skipped")

    qtbot.mouseClick(panel.open_button(panel.row(folder / "film.srt")), Qt.MouseButton.LeftButton)
    assert panel.opened == [folder / "film.zh-Hans.srt"]
    assert panel.errors == []


def test_a_dropped_deck_translates_and_a_locked_one_fails_alone(qtbot, panel, tmp_path):
    from pptx import Presentation

    deck = Presentation()
    for title in ("Where is the station?", "I like green tea."):
        deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = title
    deck.save(tmp_path / "deck.pptx")
    (tmp_path / "locked.pptx").write_bytes(bytes.fromhex("d0cf11e0a1b11ae1") + bytes(600))
    with qtbot.waitSignal(panel.busy_changed, timeout=WAIT):
        drop(panel, tmp_path / "deck.pptx", tmp_path / "locked.pptx")
    qtbot.waitUntil(lambda: not panel.busy, timeout=WAIT)
    assert status(panel, tmp_path / "deck.pptx") == "done"
    assert status(panel, tmp_path / "locked.pptx").startswith("failed: ") and \
        "password-protected" in status(panel, tmp_path / "locked.pptx")
    titles = [s.shapes.title.text for s in Presentation(tmp_path / "deck.zh-Hans.pptx").slides]
    assert len(titles) == 2 and all(CJK.search(t) for t in titles)
    assert not (tmp_path / "locked.zh-Hans.pptx").exists()


def test_a_dropped_workbook_translates_its_text_cells_alone(qtbot, panel, tmp_path):
    import openpyxl

    wb = openpyxl.Workbook()
    wb.active.append(["Where is the station?", 12.5, "=B1*2"])
    wb.active.append(["I like green tea.", 3, None])
    wb.save(tmp_path / "prices.xlsx")
    with qtbot.waitSignal(panel.busy_changed, timeout=WAIT):
        drop(panel, tmp_path / "prices.xlsx")
    qtbot.waitUntil(lambda: not panel.busy, timeout=WAIT)
    assert status(panel, tmp_path / "prices.xlsx") == "done"
    rows = [[c.value for c in row] for row in openpyxl.load_workbook(tmp_path / "prices.zh-Hans.xlsx").active.iter_rows()]
    assert [r[1:] for r in rows] == [[12.5, "=B1*2"], [3, None]] and all(CJK.search(r[0]) for r in rows)


def test_a_dropped_book_translates_and_stays_an_epub(qtbot, panel, tmp_path):
    import zipfile

    from .test_doc_epub import _book

    _book(tmp_path / "book.epub")
    with qtbot.waitSignal(panel.busy_changed, timeout=WAIT):
        drop(panel, tmp_path / "book.epub")
    qtbot.waitUntil(lambda: not panel.busy, timeout=WAIT)
    assert status(panel, tmp_path / "book.epub") == "done"
    with zipfile.ZipFile(tmp_path / "book.zh-Hans.epub") as archive:
        assert archive.namelist()[0] == "mimetype"
        assert CJK.search(archive.read("OEBPS/Text/chapter2.xhtml").decode())


def test_output_folder_chooser_and_add_files(qtbot, panel, tmp_path, monkeypatch):
    source = tmp_path / "src" / "letter.txt"
    source.parent.mkdir()
    source.write_text("\n\n".join(sentences("chooser", 3)), encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(out)))
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", staticmethod(lambda *a, **k: ([str(source)], "")))
    with qtbot.waitSignal(panel.output_folder_changed, timeout=1000) as changed:
        qtbot.mouseClick(panel.choose_button, Qt.MouseButton.LeftButton)
    assert changed.args == [str(out)]
    assert panel.output_edit.text() == str(out)

    qtbot.mouseClick(panel.add_button, Qt.MouseButton.LeftButton)
    assert status(panel, source) == "queued"
    qtbot.waitUntil(lambda: not panel.busy, timeout=WAIT)
    assert status(panel, source) == "done"
    assert CJK.search((out / "letter.zh-Hans.txt").read_text(encoding="utf-8"))
    assert not (source.parent / "letter.zh-Hans.txt").exists()

    with qtbot.waitSignal(panel.output_folder_changed, timeout=1000) as cleared:
        qtbot.mouseClick(panel.beside_button, Qt.MouseButton.LeftButton)
    assert cleared.args == [""] and panel.output_folder == ""


def test_bad_file_fails_alone(qtbot, panel, tmp_path):
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("\n\n".join(sentences("good", 3)), encoding="utf-8")
    bad.write_bytes("The café is open.\n".encode("latin-1"))
    panel.add_files([good, bad])
    qtbot.waitUntil(lambda: not panel.busy, timeout=WAIT)
    assert status(panel, good) == "done"
    failed = status(panel, bad)
    assert failed.startswith("failed: ") and "UTF-8" in failed and "0xE9" in failed
    assert not (tmp_path / "bad.zh-Hans.txt").exists()
    assert panel.open_button(panel.row(bad)) is None
    assert "1 done, 1 failed" in panel.summary_label.text()
    assert panel.errors == []


def test_cancel_a_large_job(qtbot, panel, tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    files = []
    for i in range(20):
        files.append(folder / f"part{i:02d}.txt")
        files[-1].write_text("\n\n".join(sentences(f"cancel{i}", 50)), encoding="utf-8")
    ended = []
    panel.busy_changed.connect(ended.append)
    panel.add_files([folder])
    qtbot.waitUntil(lambda: all(panel.row(f) is not None for f in files), timeout=WAIT)
    assert panel.cancel_button.isEnabled()
    qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.busy, timeout=WAIT)

    assert ended == [True, False]
    states = [status(panel, f) for f in files]
    assert states.count("cancelled") >= 15, states
    assert set(states) <= {"cancelled", "done"}, states
    assert "cancelled" in panel.summary_label.text()
    assert not panel.cancel_button.isEnabled()
    assert panel.progress.value() < panel.progress.maximum()


def test_files_added_during_a_job_run_next(qtbot, panel, tmp_path):
    first = tmp_path / "first"
    first.mkdir()
    for i in range(3):
        (first / f"f{i}.txt").write_text("\n\n".join(sentences(f"first{i}", 20)), encoding="utf-8")
    later = tmp_path / "later.txt"
    later.write_text("\n\n".join(sentences("later", 5)), encoding="utf-8")
    busy, jobs = [], []
    panel.busy_changed.connect(busy.append)
    panel.job_ended.connect(jobs.append)
    panel.add_files([first])
    panel.add_files([later])
    assert panel.busy and status(panel, later) == "queued"
    assert "1 queued" in panel.summary_label.text()
    qtbot.waitUntil(lambda: not panel.busy, timeout=WAIT)

    assert busy == [True, False]
    assert len(jobs) == 2 and all(j is not None for j in jobs)
    assert [p.input.name for p in jobs[1].files] == ["later.txt"]
    assert status(panel, later) == "done"
    assert all(status(panel, first / f"f{i}.txt") == "done" for i in range(3))
    assert CJK.search((tmp_path / "later.zh-Hans.txt").read_text(encoding="utf-8"))


def test_switching_the_model_cancels_the_running_job(qtbot, tmp_path):
    own = ModelSession()
    own.load_now(EMBEDDED, threads=1)
    widget = Panel(own, settings())
    qtbot.addWidget(widget)
    try:
        files = [tmp_path / f"f{i:02d}.txt" for i in range(12)]
        for i, path in enumerate(files):
            path.write_text("\n\n".join(sentences(f"switch{i}", 60)), encoding="utf-8")
        widget.add_files([tmp_path])
        with qtbot.waitSignal(own.loaded, timeout=WAIT):
            own.load(EMBEDDED, threads=1)
        qtbot.waitUntil(lambda: not widget.busy, timeout=WAIT)
        states = [status(widget, path) for path in files]
        assert "cancelled" in states and set(states) <= {"cancelled", "done"}, (states, widget.errors)
        for path, state in zip(files, states):  # never "done" with the old model's partial output
            output = path.with_name(path.stem + ".zh-Hans.txt")
            assert output.exists() == (state == "done")
            if state == "done":
                assert all(CJK.search(p) for p in output.read_text(encoding="utf-8").split("\n\n"))
        assert "The model changed" in widget.summary_label.text()
        assert widget.errors == []
    finally:
        own.close()


def test_no_model_shows_an_error(qtbot, tmp_path):
    empty = ModelSession()
    widget = Panel(empty, settings())
    qtbot.addWidget(widget)
    (tmp_path / "a.txt").write_text("Hello.", encoding="utf-8")
    widget.add_files([tmp_path / "a.txt"])
    assert widget.errors and widget.errors[0][0] == "No model loaded"
    assert not widget.busy and widget.tree.topLevelItemCount() == 0


# -- the models -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """A user models folder with a copy of the demo bundle and a corrupt one, and a copy
    for the environment variable."""
    root = tmp_path_factory.mktemp("bundles")
    user = root / "models"
    shutil.copytree(EMBEDDED, user / "x")
    shutil.copytree(EMBEDDED, user / "broken")
    with open(user / "broken" / "encoder.onnx", "r+b") as f:
        f.truncate(1000)
    shutil.copytree(EMBEDDED, root / "env-model")
    shutil.copytree(EMBEDDED, root / "outside")
    return SimpleNamespace(root=root, user=user, copy=user / "x", broken=user / "broken",
                           env=root / "env-model", outside=root / "outside")


def test_find_bundles_embedded(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_MODEL, raising=False)
    entries = find_bundles(tmp_path / "none")
    demo = [e for e in entries if e.path == EMBEDDED]
    assert len(demo) == 1 and len(entries) == 1
    entry = demo[0]
    assert (entry.name, entry.origin, entry.scheme, entry.error) == (DEFAULT_MODEL, "embedded", "int8r", None)
    assert entry.targets == ("zh-Hans", "zh-Hant")
    assert entry.card.startswith("# tatoeba-en-zh-small")
    assert entry.figures["validation"]["int8_check"]["passed"] is True
    assert 13 < entry.size_mb < 15


def test_find_bundles_user_environment_and_broken(bundles, monkeypatch):
    monkeypatch.setenv(ENV_MODEL, str(bundles.env))
    entries = {e.path: e for e in find_bundles(bundles.user)}
    assert entries[EMBEDDED].origin == "embedded"
    assert entries[bundles.env].origin == "environment" and entries[bundles.env].error is None
    assert entries[bundles.copy].origin == "user folder" and entries[bundles.copy].error is None
    assert entries[bundles.copy].card.startswith("# tatoeba-en-zh-small")
    broken = entries[bundles.broken]
    assert broken.origin == "user folder" and broken.name == DEFAULT_MODEL
    assert "encoder.onnx" in broken.error and "truncated" in broken.error

    monkeypatch.setenv(ENV_MODEL, str(bundles.root / "missing"))
    missing = [e for e in find_bundles(bundles.user) if e.origin == "environment"]
    assert len(missing) == 1 and "does not exist" in missing[0].error


class Dialog(ModelsDialog):
    def __init__(self, *args, **kwargs):
        self.errors: list[tuple[str, str]] = []
        self.opened: list[Path] = []
        super().__init__(*args, **kwargs)

    def show_error(self, title, text):
        self.errors.append((title, text))

    def open_folder(self, path):
        self.opened.append(Path(path))


def open_dialog(qtbot, current, user) -> Dialog:
    dialog = Dialog(current, user_dir=user)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.list.count() > 0, timeout=WAIT)
    return dialog


def test_dialog_switches_the_model_without_restart(qtbot, qapp, bundles, monkeypatch):
    monkeypatch.delenv(ENV_MODEL, raising=False)
    dialog = open_dialog(qtbot, EMBEDDED, bundles.user)
    assert dialog.selected_entry().path == EMBEDDED
    current = dialog.list.currentItem()
    assert "(current)" in current.text() and current.font().bold()
    assert "tatoeba-en-zh-small" in dialog.card.toPlainText()
    assert "Figures recorded in bundle.json" in dialog.card.toPlainText()
    broken = [dialog.list.item(i) for i in range(dialog.list.count())
              if dialog.list.item(i).data(Qt.ItemDataRole.UserRole).path == bundles.broken]
    assert len(broken) == 1 and not broken[0].flags() & Qt.ItemFlag.ItemIsEnabled
    assert "truncated" in broken[0].text()
    assert not dialog.select_path(bundles.broken)

    assert dialog.select_path(bundles.copy)
    assert dialog.switch_button.isEnabled()
    qtbot.mouseClick(dialog.switch_button, Qt.MouseButton.LeftButton)
    assert dialog.result() == QDialog.DialogCode.Accepted
    assert dialog.chosen == bundles.copy

    own = ModelSession()
    try:
        first = own.load_now(EMBEDDED, threads=1)
        with qtbot.waitSignal(own.loaded, timeout=WAIT) as loaded:
            own.load(dialog.chosen, threads=1)
        translator = loaded.args[0]
        assert translator is own.translator and translator is not first
        assert translator.bundle.path == bundles.copy
        assert CJK.search(translator.translate("Where is the station?"))
    finally:
        own.close()


def test_dialog_cancel_leaves_nothing_chosen(qtbot, bundles, monkeypatch):
    monkeypatch.delenv(ENV_MODEL, raising=False)
    dialog = open_dialog(qtbot, bundles.copy, bundles.user)
    assert dialog.selected_entry().path == bundles.copy
    dialog.reject()
    assert dialog.chosen is None


def test_dialog_adds_folders(qtbot, bundles, monkeypatch):
    monkeypatch.delenv(ENV_MODEL, raising=False)
    user = bundles.root / "added-user"
    dialog = open_dialog(qtbot, EMBEDDED, user)
    with qtbot.waitSignal(dialog.refreshed, timeout=WAIT):
        dialog.add_folder(bundles.outside)
    entry = dialog.selected_entry()
    assert entry.path == user / "outside" and entry.origin == "user folder" and entry.error is None
    assert (user / "outside" / "bundle.json").is_file()

    qtbot.waitUntil(lambda: dialog.add_button.isEnabled(), timeout=WAIT)
    dialog.add_folder(bundles.broken)
    qtbot.waitUntil(lambda: bool(dialog.errors), timeout=WAIT)
    assert "truncated" in dialog.errors[0][1]
    assert not (user / "broken").exists()

    qtbot.mouseClick(dialog.user_button, Qt.MouseButton.LeftButton)
    assert dialog.opened == [user]


# -- Add…: every source `models add` takes ----------------------------------------------------
TINY_HF = Path(__file__).resolve().parent / "fixtures" / "tiny-marian"
TINY_INT8 = Path(__file__).resolve().parent / "fixtures" / "tiny-int8"


def _installed(user: Path) -> list[str]:
    """Everything in the models folder, staging folders included."""
    return sorted(p.name for p in user.iterdir()) if user.is_dir() else []


def test_add_dialog_takes_a_source_and_a_name(qtbot, tmp_path, monkeypatch):
    from edge_translator.gui.addmodel import AddModelDialog

    dialog = AddModelDialog(start=tmp_path)
    qtbot.addWidget(dialog)
    assert not dialog.ok_button.isEnabled()  # nothing to add yet
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(tmp_path / "m.tar"), ""))
    dialog.choose_file()
    assert dialog.source() == str(tmp_path / "m.tar") and dialog.ok_button.isEnabled()
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(tmp_path))
    dialog.choose_folder()
    assert dialog.source() == str(tmp_path) and dialog.name() is None
    dialog.name_edit.setText("  mine ")
    dialog.source_edit.setText("  Helsinki-NLP/opus-mt-en-zh ")
    assert (dialog.source(), dialog.name()) == ("Helsinki-NLP/opus-mt-en-zh", "mine")


def test_dialog_adds_a_packed_tar_under_a_name(qtbot, tmp_path, monkeypatch):
    from edge_translator.store import archive

    monkeypatch.delenv(ENV_MODEL, raising=False)
    packed = archive.pack(TINY_INT8, tmp_path / "tiny.tar")
    user = tmp_path / "user"
    dialog = open_dialog(qtbot, EMBEDDED, user)
    with qtbot.waitSignal(dialog.refreshed, timeout=WAIT):
        dialog.add_source(str(packed), "packed")
    assert dialog.selected_entry().path == user / "packed" and dialog.errors == []
    assert "unpacking" in dialog.stages and _installed(user) == ["packed"]


def test_dialog_converts_a_hugging_face_folder_with_progress(qtbot, tmp_path, monkeypatch):
    from edge_translator.core.bundle import load_bundle
    from edge_translator.toolchain.export import STAGES

    monkeypatch.delenv(ENV_MODEL, raising=False)
    user = tmp_path / "user"
    dialog = open_dialog(qtbot, EMBEDDED, user)
    with qtbot.waitSignal(dialog.refreshed, timeout=120000):
        dialog.add_source(str(TINY_HF))
        assert dialog.progress is not None and dialog.progress.isVisible()
    assert dialog.errors == [] and dialog.progress is None
    assert {"reading the checkpoint", "checking them against float64"} <= set(dialog.stages) <= set(STAGES)
    entry = dialog.selected_entry()
    assert entry.path == user / "tiny-marian" and entry.error is None
    assert load_bundle(entry.path).quantization["mode"] == "rowwise"
    assert _installed(user) == ["tiny-marian"]


def test_cancelling_a_conversion_installs_nothing(qtbot, tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_MODEL, raising=False)
    user = tmp_path / "user"
    dialog = open_dialog(qtbot, EMBEDDED, user)
    # hold the conversion inside its graph-building stage until Cancel is pressed, so the
    # cancel lands mid-conversion however fast the tiny model converts
    # (patched on the class, so that no Qt wrapper is left in a reference cycle)
    from edge_translator.gui.models import _Worker

    held, release, send = threading.Event(), threading.Event(), _Worker.send

    def holding_send(worker, name, *args):
        send(worker, name, *args)
        if name == "progressed" and args[0] == "building the float32 graphs":
            held.set()
            assert release.wait(120)

    monkeypatch.setattr(_Worker, "send", holding_send)
    dialog.add_source(str(TINY_HF))
    qtbot.waitUntil(held.is_set, timeout=120000)
    with qtbot.waitSignal(dialog.cancelled, timeout=120000):
        qtbot.mouseClick(dialog.progress.findChild(QPushButton), Qt.MouseButton.LeftButton)  # as a user does
        release.set()
    assert dialog.errors == [] and "cancelled" in dialog.status.text()
    assert _installed(user) == []  # no model, no staging folder
    assert dialog.add_button.isEnabled()


@pytest.mark.parametrize("make, words", [
    (lambda p: p.mkdir() or p, "holds no model"),
    (lambda p: p.with_suffix(".zip").write_bytes(b"PK not a zip") or p.with_suffix(".zip"), "zip"),
])
def test_what_is_no_model_is_one_line_and_installs_nothing(qtbot, tmp_path, monkeypatch, make, words):
    monkeypatch.delenv(ENV_MODEL, raising=False)
    source = make(tmp_path / "thing")
    user = tmp_path / "user"
    dialog = open_dialog(qtbot, EMBEDDED, user)
    dialog.add_source(str(source))
    qtbot.waitUntil(lambda: bool(dialog.errors), timeout=WAIT)
    [(title, text)] = dialog.errors
    assert words in text.lower() and "\n" not in text and "Traceback" not in text
    assert _installed(user) == [] and dialog.progress is None


def test_converting_without_the_convert_extra_says_which_extra(qtbot, tmp_path, monkeypatch):
    import importlib.util

    monkeypatch.delenv(ENV_MODEL, raising=False)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnx" else real(name, *a))
    user = tmp_path / "user"
    dialog = open_dialog(qtbot, EMBEDDED, user)
    dialog.add_source(str(TINY_HF))
    qtbot.waitUntil(lambda: bool(dialog.errors), timeout=WAIT)
    assert "pip install 'edge-translator[convert]'" in dialog.errors[0][1]
    assert "no module onnx" in dialog.errors[0][1] and _installed(user) == []
