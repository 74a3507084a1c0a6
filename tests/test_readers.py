"""Checkpoints read with numpy alone: safetensors, pytorch_model.bin (through a restricted
unpickler) and Marian releases give the weights transformers gives, bit for bit; a
malicious pickle runs nothing; broken files end in one line."""

from __future__ import annotations

import io
import json
import pickle
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from edge_translator.core.errors import ExportError
from edge_translator.toolchain.marianrelease import read_release, unpack_release, write_release
from edge_translator.toolchain.ptzip import read_torch_zip
from edge_translator.toolchain.statedict import read_hf_dir, read_safetensors, sinusoidal_positions

torch = pytest.importorskip("torch")  # the reference side only; the readers never import it


def _same(a, b, positions: bool = True) -> None:
    """Every array equal, bit for bit, and the same matrices shared."""
    assert a.shape == b.shape
    names = ["encoder_embed", "decoder_embed", "lm_head", "final_logits_bias"]
    names += ["encoder_positions", "decoder_positions"] if positions else []
    for name in names:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype == np.float32 and np.array_equal(x, y), name
    for la, lb in zip(a.encoder_layers + a.decoder_layers, b.encoder_layers + b.decoder_layers, strict=True):
        assert la.keys() == lb.keys()
        for key in la:
            assert la[key].dtype == np.float32 and np.array_equal(la[key], lb[key]), key
    assert (a.encoder_embed is a.decoder_embed) == (b.encoder_embed is b.decoder_embed)
    assert (a.lm_head is a.decoder_embed) == (b.lm_head is b.decoder_embed)


def _reference(folder: Path):
    from edge_translator.toolchain.marian import extract_weights, load_model

    model, _ = load_model(folder)
    return model, extract_weights(model, str(folder))


def _as_bin(folder: Path, model, out: Path) -> Path:
    shutil.copytree(folder, out)
    (out / "model.safetensors").unlink(missing_ok=True)
    torch.save(model.state_dict(), out / "pytorch_model.bin")
    return out


@pytest.fixture(scope="module")
def full_hf(tmp_path_factory):
    from edge_translator.toolchain.testmodels import build_full

    out = tmp_path_factory.mktemp("full") / "hf"
    build_full(out)
    return out


@pytest.mark.parametrize("which", ["tiny", "full"])
def test_safetensors_and_torch_bin_read_as_transformers_does(which, tiny_hf, full_hf, tmp_path):
    folder = tiny_hf if which == "tiny" else full_hf
    model, reference = _reference(folder)
    _same(read_hf_dir(folder), reference)
    _same(read_hf_dir(_as_bin(folder, model, tmp_path / "bin")), reference)


def test_a_marian_release_reads_as_the_model_it_was_written_from(full_hf, tmp_path):
    """The full shape written with marian-nmt's names, read back: the same weights (Marian's
    positions are dim-emb rows, as the opus-mt ports have: 512 here, the config's too)."""
    _, reference = _reference(full_hf)
    vocab = json.loads((full_hf / "vocab.json").read_text())
    release = write_release(reference, vocab, full_hf, tmp_path / "release")
    weights, read_vocab, decoder = read_release(release)
    _same(weights, reference)
    assert read_vocab == vocab and int(decoder["beam-size"]) == 4
    with zipfile.ZipFile(tmp_path / "release.zip", "w") as z:
        for p in release.iterdir():
            z.write(p, f"opus-2021/{p.name}")
    _same(read_release(unpack_release(tmp_path / "release.zip", tmp_path / "unzipped"))[0], reference)


def test_positions_are_transformers_own(tiny_hf):
    _, reference = _reference(tiny_hf)
    n, d = reference.encoder_positions.shape
    assert np.array_equal(sinusoidal_positions(n, d), reference.encoder_positions)
    odd = sinusoidal_positions(7, 5)  # an odd width: three sines, two cosines
    assert odd.shape == (7, 5) and np.array_equal(odd[:, 0], np.sin(np.arange(7.0)).astype(np.float32))
    assert np.array_equal(odd[:, 4], np.cos(np.arange(7.0) / 10000 ** (2 / 5)).astype(np.float32))


def test_bfloat16_and_float16_widen_exactly(tmp_path):
    values = np.array([1.0, -2.5, 3.140625, 1e-3, 65504.0], np.float32)
    bf16 = (values.view(np.uint32) >> 16).astype(np.uint16)
    f16 = values.astype(np.float16)
    header = {"a": {"dtype": "BF16", "shape": [5], "data_offsets": [0, 10]},
              "b": {"dtype": "F16", "shape": [5], "data_offsets": [10, 20]}}
    blob = json.dumps(header).encode()
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + bf16.tobytes() + f16.tobytes())
    read = read_safetensors(path)
    assert np.array_equal(read["a"], (bf16.astype(np.uint32) << 16).view(np.float32))
    assert np.array_equal(read["b"], f16.astype(np.float32)) and read["a"].dtype == read["b"].dtype == np.float32


def _torch_like_zip(path: Path, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/version", "3\n")
    return path


class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (__import__("os").system, (f"touch {self.marker}",))


@pytest.mark.parametrize("kind", ["os.system", "builtins.exec", "a class", "legacy"])
def test_a_malicious_pickle_is_refused_and_runs_nothing(kind, tmp_path):
    marker = tmp_path / "ran"
    if kind == "os.system":
        payload = pickle.dumps({"w": _Evil(marker)}, protocol=2)
    elif kind == "builtins.exec":
        payload = (b"\x80\x02cbuiltins\nexec\nq\x00X" + struct.pack("<I", 40)
                   + f"open({str(marker)!r}, 'w')".ljust(40).encode() + b"\x85R.")
    elif kind == "a class":
        payload = pickle.dumps({"w": io.BytesIO(b"x")}, protocol=4)  # STACK_GLOBAL of an unlisted class
    if kind == "legacy":
        path = tmp_path / "pytorch_model.bin"
        path.write_bytes(pickle.dumps({"w": _Evil(marker)}))
        words = "not a zip checkpoint"
    else:
        path = _torch_like_zip(tmp_path / "pytorch_model.bin", payload)
        words = "refusing to load it"
    with pytest.raises(ExportError) as err:
        read_torch_zip(path)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert not marker.exists()


def _damaged(kind: str, tmp_path: Path, tiny_hf: Path) -> Path:
    folder = tmp_path / "m"
    shutil.copytree(tiny_hf, folder)
    data = (folder / "model.safetensors").read_bytes()
    if kind == "truncated safetensors":
        (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    elif kind == "lying header":
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + length])
        name = next(k for k in header if k != "__metadata__")
        header[name]["data_offsets"][1] += 4
        blob = json.dumps(header).encode()
        (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(blob)) + blob + data[8 + length:])
    elif kind == "truncated bin":
        model, _ = _reference(tiny_hf)
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
        raw = (folder / "pytorch_model.bin").read_bytes()
        (folder / "pytorch_model.bin").write_bytes(raw[: len(raw) * 2 // 3])
    elif kind == "missing tensor":
        from safetensors.numpy import load_file, save_file

        state = load_file(str(folder / "model.safetensors"))
        state.pop("model.decoder.layers.1.fc2.weight")
        save_file(state, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("kind, words", [("truncated safetensors", "truncated"), ("lying header", "wrong size"),
                                         ("truncated bin", "zip checkpoint"),
                                         ("missing tensor", "lack model.decoder.layers.1.fc2.weight")])
def test_broken_checkpoints_end_in_one_line(kind, words, tmp_path, tiny_hf):
    with pytest.raises(ExportError) as err:
        read_hf_dir(_damaged(kind, tmp_path, tiny_hf))
    assert words in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_broken_releases_end_in_one_line(full_hf, tmp_path):
    _, reference = _reference(full_hf)
    release = write_release(reference, json.loads((full_hf / "vocab.json").read_text()), full_hf, tmp_path / "r")
    (release / "decoder.yml").unlink()
    with pytest.raises(ExportError, match="decoder.yml is missing"):
        read_release(release)
    with zipfile.ZipFile(tmp_path / "evil.zip", "w") as z:
        z.writestr("../evil.npz", b"x")
    with pytest.raises(ExportError, match="points outside"):
        unpack_release(tmp_path / "evil.zip", tmp_path / "out")
    assert not (tmp_path / "evil.npz").exists()
    (tmp_path / "short.zip").write_bytes((tmp_path / "evil.zip").read_bytes()[:20])
    with pytest.raises(ExportError, match="not a readable zip"):
        unpack_release(tmp_path / "short.zip", tmp_path / "out2")


def test_the_readers_import_neither_torch_nor_transformers(tiny_hf, tmp_path):
    model, _ = _reference(tiny_hf)
    binary = _as_bin(tiny_hf, model, tmp_path / "bin")
    code = ("import sys; from edge_translator.toolchain.statedict import read_hf_dir; "
            f"read_hf_dir({str(tiny_hf)!r}); read_hf_dir({str(binary)!r}); "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr
