"""``edge-translator models``: what a source is, packing and unpacking, installing in one step
(and nothing left behind when it fails), downloads, removing, the default model."""

from __future__ import annotations

import http.server
import io
import json
import os
import shutil
import tarfile
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

from edge_translator.core.errors import BundleError, EdgeTranslatorError, InputError
from edge_translator.core.locations import ENV_MODEL, ENV_MODELS_DIR, resolve_model
from edge_translator.store import archive, fetch, install
from edge_translator.store.archive import ArchiveError

from .conftest import run_cli


@pytest.fixture
def models(tmp_path, monkeypatch) -> Path:
    """An empty user models folder, the one every call below uses."""
    folder = tmp_path / "models"
    monkeypatch.setenv(ENV_MODELS_DIR, str(folder))
    monkeypatch.delenv(ENV_MODEL, raising=False)
    return folder


@pytest.fixture
def packed(tmp_path, tiny_int8) -> Path:
    return archive.pack(tiny_int8, tmp_path / "tiny.tar")


def _left(folder: Path) -> list[str]:
    """What the models folder holds, apart from installed models' own folders."""
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text, text
    return text


# -- what a source is ------------------------------------------------------------------------
def test_every_kind_of_source_is_told_apart(tmp_path, tiny_int8, tiny_hf, packed):
    release = tmp_path / "opus-2021-02-23"
    release.mkdir()
    (release / "opus.spm32k-spm32k.transformer.npz").write_bytes(b"")
    (release / "opus.spm32k-spm32k.vocab.yml").write_text("</s>: 0\n")
    (tmp_path / "release.zip").write_bytes(b"PK")
    assert install.identify(str(tiny_int8)) == install.Source("bundle", str(tiny_int8), "tiny-int8")
    assert install.identify(str(tiny_hf)).kind == "hf-folder"
    assert install.identify(str(release)).kind == "marian-folder"
    assert install.identify(str(tmp_path / "release.zip")).kind == "marian-zip"
    assert install.identify(str(packed)) == install.Source("archive", str(packed), "tiny")
    assert install.identify("https://example.org/m/opus-mt-en-zh.tar").name == "opus-mt-en-zh"
    assert install.identify("Helsinki-NLP/opus-mt-en-zh") == install.Source("hub", "Helsinki-NLP/opus-mt-en-zh",
                                                                          "opus-mt-en-zh")


@pytest.mark.parametrize("make, words", [
    (lambda p: p / "missing", "does not exist"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "holds no model"),
    (lambda p: (p / "notes.txt").write_text("x") and p / "notes.txt", "neither a packed bundle"),
    (lambda p: p / "a" / "b" / "c", "does not exist"),
])
def test_what_is_no_model_source_is_said_in_one_line(tmp_path, make, words):
    with pytest.raises(InputError) as err:
        install.identify(str(make(tmp_path)))
    assert words in _one_line(err.value)


# -- pack and unpack ---------------------------------------------------------------------------
def test_a_packed_bundle_unpacks_to_the_same_files(tmp_path, tiny_int8, packed):
    out = archive.unpack(packed, tmp_path / "out")
    for name in archive.bundle_members(tiny_int8):
        assert (out / name).read_bytes() == (tiny_int8 / name).read_bytes()
    with tarfile.open(packed) as tar:
        assert {m.name.split("/")[0] for m in tar.getmembers()} == {"tiny-int8"}
        assert all(m.uid == 0 and m.isreg() for m in tar.getmembers())


def test_pack_refuses_a_corrupt_bundle_and_an_existing_file(tmp_path, bundle_copy, packed):
    with pytest.raises(ArchiveError, match="pass --force"):
        archive.pack(bundle_copy, packed)
    (bundle_copy / "decoder.onnx").write_bytes(b"broken")
    with pytest.raises(BundleError):
        archive.pack(bundle_copy, tmp_path / "bad.tar")
    assert not (tmp_path / "bad.tar").exists() and not list(tmp_path.glob(".bad.tar*"))


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _members(bundle: Path, top: str = "m") -> list[tuple[tarfile.TarInfo, bytes]]:
    return [(tarfile.TarInfo(f"{top}/{n}"), (bundle / n).read_bytes()) for n in archive.bundle_members(bundle)]


def _link(name: str, target: str, kind=tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


@pytest.mark.parametrize("case, words", [
    ("traversal", "points outside its folder"),
    ("absolute", "points outside its folder"),
    ("symlink", "not a plain file"),
    ("hardlink", "not a plain file"),
    ("extra", "does not list"),
    ("missing", "lacks"),
    ("two folders", "2 folders"),
    ("nested", "not a file of the bundle's folder"),
    ("no manifest", "no bundle.json"),
    ("bad checksum", "does not match its sha256"),
    ("truncated", "truncated or corrupt"),
    ("not a tar", "not a readable tar archive"),
])
def test_a_bad_archive_is_refused_in_one_line_and_nothing_is_kept(tmp_path, tiny_int8, packed, case, words):
    members = _members(tiny_int8)
    path = tmp_path / f"{case}.tar"
    if case == "traversal":
        _tar(path, members + [(tarfile.TarInfo("m/../../evil"), b"x")])
    elif case == "absolute":
        _tar(path, members + [(tarfile.TarInfo("/tmp/evil"), b"x")])
    elif case == "symlink":
        _tar(path, members + [_link("m/README.md", "/etc/passwd")])
    elif case == "hardlink":
        _tar(path, members + [_link("m/README.md", "m/bundle.json", tarfile.LNKTYPE)])
    elif case == "extra":
        _tar(path, members + [(tarfile.TarInfo("m/run.sh"), b"rm -rf /")])
    elif case == "missing":
        _tar(path, [m for m in members if not m[0].name.endswith("decoder.onnx")])
    elif case == "two folders":
        _tar(path, members + [(tarfile.TarInfo("other/bundle.json"), b"{}")])
    elif case == "nested":
        _tar(path, members + [(tarfile.TarInfo("m/sub/file"), b"x")])
    elif case == "no manifest":
        _tar(path, [m for m in members if not m[0].name.endswith("bundle.json")])
    elif case == "bad checksum":
        _tar(path, [(i, d[:-1] + bytes([d[-1] ^ 1]) if i.name.endswith("decoder.onnx") else d) for i, d in members])
    elif case == "truncated":
        path.write_bytes(packed.read_bytes()[: packed.stat().st_size // 2])
    else:
        path.write_bytes(b"this is no archive" * 100)
    out = tmp_path / "out"
    with pytest.raises(EdgeTranslatorError) as err:
        archive.unpack(path, out)
    assert words in _one_line(err.value)
    assert not out.exists() and not (tmp_path / "evil").exists()


# -- add ---------------------------------------------------------------------------------------
def test_add_a_packed_bundle_then_use_list_verify_default_and_remove_it(models, packed, tiny_int8):
    path = install.add(str(packed))
    assert path == models / "tiny" and _left(models) == ["tiny"]
    assert resolve_model("tiny") == path  # --model NAME
    listed = run_cli("models", "list", "--json", env={ENV_MODELS_DIR: str(models)})
    rows = [json.loads(line) for line in listed.stdout.decode().splitlines()]
    assert {(r["name"], r["origin"], r["error"]) for r in rows} >= {("tiny", "user folder", None)}
    assert run_cli("models", "verify", "tiny", env={ENV_MODELS_DIR: str(models)}).returncode == 0
    # the default: used when nothing else is said, by the CLI too
    install.set_default("tiny")
    assert resolve_model(None) == path
    result = run_cli("translate", "hello", env={ENV_MODELS_DIR: str(models)})
    assert result.returncode == 0, result.stderr.decode()
    assert run_cli("models", "default", env={ENV_MODELS_DIR: str(models)}).stdout.decode().strip() == str(path)
    # a broken file is found by verify (exit 3), and named
    (path / "decoder.onnx").write_bytes(b"broken")
    result = run_cli("models", "verify", env={ENV_MODELS_DIR: str(models)})
    assert result.returncode == 3 and "BROKEN tiny" in result.stdout.decode()
    install.remove("tiny")
    assert _left(models) == [] and resolve_model(None).name == "tatoeba-en-zh-small"


def test_add_a_bundle_folder_copies_only_its_files_and_verifies_the_copy(models, bundle_copy):
    (bundle_copy / "notes.txt").write_text("not part of the bundle")
    path = install.add(str(bundle_copy), install.AddOptions(name="copied"))
    assert not (path / "notes.txt").exists() and (path / "bundle.json").is_file()
    (bundle_copy / "encoder.onnx").write_bytes(b"broken")
    with pytest.raises(BundleError):
        install.add(str(bundle_copy), install.AddOptions(name="broken"))
    assert _left(models) == ["copied"]


def test_names_that_cannot_be_folders_and_names_taken_are_refused(models, packed):
    for bad in ("../up", "a/b", ".hidden", "", "x" * 200):
        with pytest.raises(InputError):
            install.add(str(packed), install.AddOptions(name=bad))
    install.add(str(packed))
    with pytest.raises(InputError) as err:
        install.add(str(packed))
    assert "--force" in _one_line(err.value)


def test_a_failed_replacement_leaves_the_installed_model_as_it_was(models, tmp_path, packed, tiny_int8):
    installed = install.add(str(packed))
    before = {p.name: p.read_bytes() for p in installed.iterdir()}
    bad = _tar(tmp_path / "tiny.tar.gz".replace(".gz", ""), [(i, d[:-1] if i.name.endswith("weights.bin") else d)
                                                            for i, d in _members(tiny_int8, "tiny")])
    with pytest.raises(BundleError):
        install.add(str(bad), install.AddOptions(force=True))
    assert {p.name: p.read_bytes() for p in installed.iterdir()} == before and _left(models) == ["tiny"]


def test_a_stopped_add_leaves_nothing_and_a_killed_ones_leftovers_are_cleaned(models, packed):
    def interrupt(stage, done, total):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        install.add(str(packed), progress=interrupt)
    assert _left(models) == []
    (models / ".adding-999999999-x").mkdir()  # a process that no longer runs
    (models / ".adding-999999999-x" / "weights.bin").write_bytes(b"half")
    install.add(str(packed))
    assert _left(models) == ["tiny"]


#: ``models add --force`` that dies (as in a power cut: no handler runs) at the rename that
#: puts the new model in place, after the old one was moved aside.
CUT_BETWEEN_RENAMES = """
import os, sys
from edge_translator.store import install
real, calls = os.replace, []
def replace(src, dst):
    calls.append((src, dst))
    if len(calls) == 2:
        os._exit(9)
    real(src, dst)
os.replace = replace
install.add(sys.argv[1], install.AddOptions(force=True))
"""


@pytest.mark.parametrize("then", ["models list", "another add"])
def test_a_replacement_cut_between_its_renames_puts_the_old_model_back(models, packed, tmp_path, then):
    import subprocess
    import sys

    installed = install.add(str(packed))
    before = {p.name: p.read_bytes() for p in installed.iterdir()}
    cut = subprocess.run([sys.executable, "-c", CUT_BETWEEN_RENAMES, str(packed)], capture_output=True,
                         env={**os.environ, ENV_MODELS_DIR: str(models)})
    assert cut.returncode == 9, cut.stderr.decode()
    assert not installed.exists() and any(p.name.startswith(".adding-") for p in models.iterdir())
    if then == "models list":
        result = run_cli("models", "list", env={ENV_MODELS_DIR: str(models)})
        assert result.returncode == 0 and b"tiny" in result.stdout, result.stderr
    else:
        install.add(str(packed), install.AddOptions(name="other"))
    assert {p.name: p.read_bytes() for p in installed.iterdir()} == before
    assert _left(models) == sorted({"tiny"} | ({"other"} if then == "another add" else set()))


def test_a_replacement_cut_after_its_renames_keeps_the_new_model(models, packed, tiny_int8, tmp_path):
    install.add(str(packed))
    dead = models / ".adding-999999999-x"  # the staging folder of an add whose process died
    (dead / "replaced-tiny").mkdir(parents=True)
    (dead / "replaced-tiny" / "bundle.json").write_text("{}")  # the old model, moved aside
    (dead / "replaced-.hidden").mkdir()  # not a model's name: never moved out
    install.add(str(packed), install.AddOptions(name="other"))
    assert _left(models) == ["other", "tiny"]
    assert (models / "tiny" / "bundle.json").read_bytes() == (tiny_int8 / "bundle.json").read_bytes()


def test_remove_and_default_refuse_what_is_not_there(models):
    with pytest.raises(InputError, match="embedded"):
        install.remove("tatoeba-en-zh-small")
    with pytest.raises(InputError, match="no model called"):
        install.remove("nothing")
    with pytest.raises(InputError, match="no model called"):
        install.set_default("nothing")
    models.mkdir()
    (models / "default").write_text("gone\n")  # chosen once, then deleted by hand
    with pytest.raises(BundleError) as err:
        resolve_model(None)
    assert "models default" in _one_line(err.value)
    install.set_default("tatoeba-en-zh-small")  # back to the built-in default
    assert not (models / "default").exists() and resolve_model(None).name == "tatoeba-en-zh-small"


# -- downloads ---------------------------------------------------------------------------------
@contextmanager
def serving(files: dict[str, bytes], lie_length: bool = False):
    """An HTTP server on 127.0.0.1 serving ``files``; ``lie_length`` announces more bytes than it sends."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = files.get(self.path.lstrip("/"))
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body) + (1000 if lie_length else 0)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_add_from_a_url_and_every_way_a_download_fails(models, packed):
    data = packed.read_bytes()
    with serving({"m/tiny.tar": data}) as url:
        seen = []
        path = install.add(f"{url}/m/tiny.tar", progress=lambda stage, done, total: seen.append((stage, total)))
        assert path.name == "tiny" and ("downloading", len(data)) in seen
        with pytest.raises(fetch.DownloadError) as err:
            install.add(f"{url}/m/other.tar")
        assert "404" in _one_line(err.value)
    with serving({"m/short.tar": data}, lie_length=True) as url:
        with pytest.raises(fetch.DownloadError) as err:
            install.add(f"{url}/m/short.tar")
        assert "run the command again" in _one_line(err.value)
    with serving({}) as url:
        closed = url  # the server is gone once the block ends
    with pytest.raises(fetch.DownloadError) as err:
        install.add(f"{closed}/m/again.tar")
    assert "cannot reach" in _one_line(err.value)
    assert _left(models) == ["tiny"]


def test_an_unreachable_hub_is_one_line_with_the_way_round(models, monkeypatch):
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(models.parent / "hf"))
    result = run_cli("models", "add", "Helsinki-NLP/opus-mt-en-zh", "--quiet",
                     env={ENV_MODELS_DIR: str(models), "HF_HUB_OFFLINE": "1", "HF_HOME": str(models.parent / "hf")})
    err = result.stderr.decode().strip()
    assert result.returncode != 0 and len(err.splitlines()) == 1, err
    assert "cannot be reached" in err and "models add FOLDER" in err
    assert _left(models) == []


def test_the_cli_and_the_desktop_app_use_the_same_models_folder(monkeypatch, tmp_path, qapp):
    from PySide6.QtCore import QStandardPaths

    from edge_translator.core.locations import APP_FOLDERS, user_models_dir
    from edge_translator.gui import models as gui_models

    monkeypatch.delenv(ENV_MODELS_DIR, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    app = qapp  # a QApplication: a bare QCoreApplication here would break later widget tests
    org, name = app.organizationName(), app.applicationName()
    app.setOrganizationName(APP_FOLDERS[0])
    app.setApplicationName(APP_FOLDERS[1])
    try:
        qt = Path(QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)) / "models"
    finally:
        app.setOrganizationName(org)
        app.setApplicationName(name)
    assert user_models_dir() == qt and gui_models.user_models_dir() == qt


def test_pack_then_add_through_the_cli(models, tmp_path, tiny_int8):
    env = {ENV_MODELS_DIR: str(models)}
    result = run_cli("models", "pack", str(tiny_int8), str(tmp_path / "t.tar"), env=env)
    assert result.returncode == 0, result.stderr.decode()
    result = run_cli("models", "add", str(tmp_path / "t.tar"), "--name", "t", "--default", env=env)
    assert result.returncode == 0 and "now the default" in result.stdout.decode(), result.stderr.decode()
    again = run_cli("models", "add", str(tmp_path / "t.tar"), "--name", "t", env=env)
    assert again.returncode == 4 and len(again.stderr.decode().strip().splitlines()) == 1
    shutil.rmtree(models / "t")
    result = run_cli("translate", "hello", env=env)  # the default is gone: one line, exit 3
    assert result.returncode == 3 and "models default" in result.stderr.decode()
    assert os.listdir(models) == ["default"]
