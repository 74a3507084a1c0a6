"""core.durable: after a power cut at any moment a final name holds the old whole file or the
new whole one, and once a write returns the new one is on the disk (tests/powercut.py)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from edge_translator.core import durable

from .powercut import PowerCut, supported

needs_proc = pytest.mark.skipif(not supported(), reason="the power-cut double reads files back through /proc")

OLD, NEW = b"old complete content\n" * 50, b"new complete content, longer\n" * 80


def _old_or_new(name: str, old: bytes | None = OLD):
    def invariant(disk):
        assert disk.read(name) in (old, NEW), f"{name} holds {disk.read(name)!r:.40}"
    return invariant


@needs_proc
def test_write_atomic_is_old_or_new_at_every_step_and_new_when_it_returns(tmp_path, monkeypatch):
    (tmp_path / "f.json").write_bytes(OLD)
    cut = PowerCut(tmp_path, monkeypatch)
    cut.watch(_old_or_new("f.json"))
    durable.write_atomic(tmp_path / "f.json", NEW)
    assert not cut.violations, cut.violations
    assert cut.disk("fsynced").read("f.json") == NEW
    assert [e[0] for e in cut.events] == ["fsync", "replace", "fsync-dir"]
    assert cut.events[0][1].endswith(f".f.json.{os.getpid()}.tmp") and cut.events[2][1] == str(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


@needs_proc
def test_the_double_catches_a_rename_without_fsyncs(tmp_path, monkeypatch):
    """What the helper exists for: the usual temp-and-rename loses the file in a power cut."""
    (tmp_path / "f.json").write_bytes(OLD)
    cut = PowerCut(tmp_path, monkeypatch)
    cut.watch(_old_or_new("f.json"))
    (tmp_path / "t").write_bytes(NEW)
    os.replace(tmp_path / "t", tmp_path / "f.json")
    assert any("metadata disk after replace" in v and "holds b''" in v for v in cut.violations), cut.violations
    assert cut.disk("fsynced").read("f.json") == OLD  # and without the folder's fsync the rename is not kept


@needs_proc
def test_without_the_folder_fsync_the_new_file_is_not_yet_on_the_disk(tmp_path, monkeypatch):
    (tmp_path / "f.json").write_bytes(OLD)
    cut = PowerCut(tmp_path, monkeypatch)
    monkeypatch.setattr(durable, "fsync_dir", lambda path: None)
    durable.write_atomic(tmp_path / "f.json", NEW)
    assert cut.disk("fsynced").read("f.json") == OLD


@needs_proc
def test_open_atomic_text_and_a_failure_midway_leaves_the_old_file(tmp_path, monkeypatch):
    (tmp_path / "f.txt").write_bytes(OLD)
    cut = PowerCut(tmp_path, monkeypatch)
    cut.watch(_old_or_new("f.txt"))
    with pytest.raises(RuntimeError):
        with durable.open_atomic(tmp_path / "f.txt", "w", encoding="utf-8") as out:
            out.write("half")
            raise RuntimeError("the writer failed")
    assert (tmp_path / "f.txt").read_bytes() == OLD and sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]
    temp = tmp_path / ".f.txt.custom"
    with durable.open_atomic(tmp_path / "f.txt", "w", temp=temp, encoding="utf-8", newline="\n") as out:
        assert Path(out.name) == temp
        out.write(NEW.decode())
    assert not cut.violations, cut.violations
    assert cut.disk("fsynced").read("f.txt") == NEW and not temp.exists()


@needs_proc
def test_replace_fsyncs_a_file_someone_else_wrote(tmp_path, monkeypatch):
    cut = PowerCut(tmp_path, monkeypatch)
    cut.watch(_old_or_new("out.tar", old=None))
    temp = tmp_path / ".out.tar.part"
    with open(temp, "wb") as handle:  # as tarfile or a csv writer given a path would
        handle.write(NEW)
    durable.replace(temp, tmp_path / "out.tar")
    assert not cut.violations, cut.violations
    assert cut.disk("fsynced").read("out.tar") == NEW


@needs_proc
def test_a_new_folder_made_by_make_dirs_survives_with_its_file(tmp_path, monkeypatch):
    cut = PowerCut(tmp_path, monkeypatch)
    cut.watch(_old_or_new("a/b/f", old=None))
    durable.make_dirs(tmp_path / "a" / "b")
    durable.make_dirs(tmp_path / "a" / "b")  # already there: nothing to do
    durable.write_atomic(tmp_path / "a" / "b" / "f", NEW)
    assert not cut.violations, cut.violations
    assert cut.disk("fsynced").read("a/b/f") == NEW


@needs_proc
def test_a_folder_fsynced_as_a_tree_then_renamed_is_whole_or_absent(tmp_path, monkeypatch):
    files = {"bundle.json": b"{}\n", "graphs/encoder.onnx": NEW, "graphs/decoder.onnx": OLD}
    cut = PowerCut(tmp_path, monkeypatch)

    def whole_or_absent(disk):
        assert disk.tree("model") in (None, files), f"model holds {disk.tree('model')}"
    cut.watch(whole_or_absent)
    staging = tmp_path / ".staging"
    for name, data in files.items():
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / name).write_bytes(data)
    durable.fsync_tree(staging)
    os.replace(staging, tmp_path / "model")
    durable.fsync_dir(tmp_path)
    assert not cut.violations, cut.violations
    assert cut.disk("fsynced").tree("model") == files


@needs_proc
def test_a_folder_renamed_without_fsync_tree_is_caught(tmp_path, monkeypatch):
    cut = PowerCut(tmp_path, monkeypatch)

    def whole_or_absent(disk):
        assert disk.tree("model") in (None, {"f": NEW}), "a partial model"
    cut.watch(whole_or_absent)
    (tmp_path / ".staging").mkdir()
    (tmp_path / ".staging" / "f").write_bytes(NEW)
    os.replace(tmp_path / ".staging", tmp_path / "model")
    durable.fsync_dir(tmp_path)
    assert cut.violations
    assert cut.disk("fsynced").tree("model") == {}  # the folder's name survived, not its file


def test_fsync_dir_skips_what_a_file_system_cannot_do_and_reports_a_disk_error(tmp_path, monkeypatch):
    calls = []

    def failing(code):
        def fsync(fd):
            calls.append(fd)
            raise OSError(code, os.strerror(code))
        return fsync
    monkeypatch.setattr(os, "fsync", failing(errno.EINVAL))
    durable.fsync_dir(tmp_path)  # a file system without folder fsync: quietly skipped
    monkeypatch.setattr(os, "fsync", failing(errno.EIO))
    with pytest.raises(OSError) as err:
        durable.fsync_dir(tmp_path)
    assert err.value.errno == errno.EIO and len(calls) == 2
    durable.fsync_dir(tmp_path / "missing")  # nothing to open: nothing to do
    monkeypatch.setattr(os, "name", "nt")
    durable.fsync_dir(str(tmp_path))  # Windows cannot fsync a folder
    assert len(calls) == 2


def test_a_failed_fsync_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    (tmp_path / "f").write_bytes(OLD)

    def fsync(fd):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError):
        durable.write_atomic(tmp_path / "f", NEW)
    assert (tmp_path / "f").read_bytes() == OLD and [p.name for p in tmp_path.iterdir()] == ["f"]
