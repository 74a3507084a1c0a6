"""One full-shape model in its three forms (safetensors, pytorch_model.bin, a Marian release)
added with ``models add`` where torch and transformers cannot be imported: three bundles with
the same files, bit for bit, as an export whose weights were read through transformers, the
same greedy output, within the float64 parity bound. A release missing a file installs nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.core.decode import Seq2Seq
from edge_translator.core.locations import ENV_MODEL, ENV_MODELS_DIR
from edge_translator.core.tokenizer import Tokenizer
from edge_translator.toolchain.testmodels import english_sentences

from .conftest import run_cli

torch = pytest.importorskip("torch")  # writes the .bin form and the transformers-read export
pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

#: ``models add`` as a user of the light extra runs it: torch and transformers unimportable.
ADD_WITHOUT_TORCH = ("import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None\n"
                     "from edge_translator.cli import main\n"
                     "sys.exit(main(['models', 'add', *sys.argv[1:]]))")


@pytest.fixture(scope="module")
def forms(tmp_path_factory) -> dict[str, Path]:
    from edge_translator.toolchain.marian import extract_weights, load_model
    from edge_translator.toolchain.marianrelease import write_release

    root = tmp_path_factory.mktemp("forms")
    safetensors = root / "hf-safetensors"
    result = run_cli("test-model", "full", str(safetensors))
    assert result.returncode == 0, result.stderr.decode()
    model, _ = load_model(safetensors)
    pickled = root / "hf-bin"
    shutil.copytree(safetensors, pickled)
    (pickled / "model.safetensors").unlink()
    torch.save(model.state_dict(), pickled / "pytorch_model.bin")
    vocab = json.loads((safetensors / "vocab.json").read_text(encoding="utf-8"))
    release = write_release(extract_weights(model, str(safetensors)), vocab, safetensors, root / "release")
    with zipfile.ZipFile(root / "release.zip", "w") as z:
        for p in sorted(release.iterdir()):
            z.write(p, f"opus-2021-02-23/{p.name}")
    return {"safetensors": safetensors, "bin": pickled, "release": release, "release.zip": root / "release.zip"}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("models")


def _add(models: Path, source: Path | str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ENV_MODEL}
    env[ENV_MODELS_DIR] = str(models)
    return subprocess.run([sys.executable, "-c", ADD_WITHOUT_TORCH, str(source), "--quiet", *args],
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def added(forms, models) -> dict[str, Path]:
    paths = {}
    for form in ("safetensors", "bin", "release.zip"):  # the folder reads as its zip (test_readers)
        name = form.replace(".", "-")
        result = _add(models, forms[form], "--name", name)
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stderr == "", result.stderr  # --quiet: no bar, no warning
        paths[form] = models / name
    return paths


@pytest.fixture(scope="module")
def through_transformers(forms, tmp_path_factory, added) -> Path:
    """The same conversion with its weights read by transformers instead of the numpy readers."""
    from edge_translator.toolchain import export as export_module
    from edge_translator.toolchain.marian import extract_weights, load_model

    def read_with_transformers(src, scratch):
        return extract_weights(load_model(src)[0], str(src)), Path(src)

    out = tmp_path_factory.mktemp("transformers") / "bundle"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(export_module, "open_source", read_with_transformers)
        export_module.export(forms["safetensors"], out, export_module.ExportOptions(name="safetensors"))
    return out


def test_the_three_forms_give_the_bundle_transformers_gives(added, through_transformers):
    expected = load_bundle(through_transformers).manifest
    assert expected["quantization"]["mode"] == "rowwise"  # the default scheme, int8r
    for form, path in added.items():
        manifest = load_bundle(path).manifest
        assert manifest["files"] == expected["files"], form  # every file, by size and sha256
        for key in ("special_ids", "targets", "default_target", "quantization", "generation"):
            assert manifest[key] == expected[key], (form, key)
        parity = manifest["validation"]["fp32_parity"]
        assert parity["max_abs_logit_diff"] <= parity["allowed_abs_logit_diff"], form
        assert parity["greedy"]["identical"] + parity["greedy"]["near_ties"] == parity["sentences"], form
        assert manifest["validation"]["fp32_parity"] == expected["validation"]["fp32_parity"], form


def test_the_three_forms_translate_alike(added):
    sentences = english_sentences(40, seed=5)
    outputs = {}
    for form, path in added.items():
        bundle = load_bundle(path)
        tok = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                             bundle.pad_id)
        target = bundle.targets["zh-Hans"].id
        hyps = Seq2Seq.load(bundle).greedy_all([tok.encode(s, target) for s in sentences], 16)
        outputs[form] = [h.ids for h in hyps]
    first = outputs["safetensors"]
    assert len({tuple(ids) for ids in first}) > 1  # the sentences do not all come out alike
    assert all(ids == first for ids in outputs.values())


@pytest.mark.parametrize("missing", ["target.spm", "decoder.yml", "opus.spm32k-spm32k.vocab.yml", ".npz"])
def test_a_release_zip_missing_a_file_installs_nothing(forms, models, added, tmp_path, missing):
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(forms["release.zip"]) as src, zipfile.ZipFile(broken, "w") as dst:
        for info in src.infolist():
            if not info.filename.endswith(missing):
                dst.writestr(info, src.read(info))
    before = sorted(p.name for p in models.iterdir())
    result = _add(models, broken)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edge-translator: error:") and "Traceback" not in result.stderr
    assert sorted(p.name for p in models.iterdir()) == before  # nothing installed, no staging left
