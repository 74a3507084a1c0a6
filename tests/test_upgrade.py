"""`edge-translator upgrade`: int8r bundles of 127-step activation codes become today's bundles.

The fixture ``tiny-int8r-127`` is the tiny model exported by the exporter as it was before
the 64-step codes (see its README): a real old bundle, not one made by inverting the upgrade.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from edge_translator.core.bundle import file_record, load_bundle, sha256_file
from edge_translator.core.cpu import CpuInfo, check_runtime, parse_cpuinfo
from edge_translator.core.decode import Seq2Seq
from edge_translator.core.errors import BundleError
from edge_translator.core.tokenizer import Tokenizer
from edge_translator.toolchain import upgrade as upgrade_module
from edge_translator.toolchain.upgrade import needs_upgrade, upgrade_bundle

from .conftest import FIXTURES, run_cli

OLD = FIXTURES / "tiny-int8r-127"
AVX2 = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse sse2 avx avx2 fma\n"
VNNI = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R)\nflags\t\t: fpu avx avx2 avx512f avx512_vnni\n"
SENTENCES = ["Hello world.", "The cat sat on the mat today.", "Where is the railway station, please?"]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory, tiny_hf):
    """The same tiny model as today's exporter writes it in int8r, with the old bundle's kind of
    decoder (``MultiHeadAttention`` appending to the past: the upgrade leaves attention alone)."""
    from edge_translator.toolchain.graphs import write_graphs
    from edge_translator.toolchain.marian import extract_weights, load_model
    from edge_translator.toolchain.quantize import QuantizeOptions

    out = tmp_path_factory.mktemp("fresh")
    model, _ = load_model(tiny_hf)
    write_graphs(extract_weights(model, str(tiny_hf)), QuantizeOptions(mode="rowwise"), out, ragged=False)
    manifest = json.loads((OLD / "bundle.json").read_text())
    manifest["quantization"]["activation_code_peak"] = 64
    for name in ("source.spm", "target.spm", "vocab.json"):
        shutil.copyfile(OLD / name, out / name)
    manifest["files"] = {p.name: file_record(p) for p in out.iterdir()}
    (out / "bundle.json").write_text(json.dumps(manifest))
    return out


@pytest.fixture
def old_copy(tmp_path):
    out = tmp_path / "old"
    shutil.copytree(OLD, out)
    return out


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory):
    out = tmp_path_factory.mktemp("upgraded") / "bundle"
    shutil.copytree(OLD, out)
    result = run_cli("upgrade", str(out))
    assert result.returncode == 0, result.stderr.decode()
    assert "upgraded: 64-step activation codes" in result.stdout.decode()
    return out


def _digests(directory):
    return {p.name: sha256_file(p) for p in sorted(directory.iterdir()) if p.is_file()}


def _graph(directory, name):
    return onnx.load(str(directory / f"{name}.onnx"), load_external_data=True).graph


@pytest.mark.parametrize("name", ["encoder", "decoder"])
def test_the_upgraded_graphs_are_what_export_writes_today(upgraded, fresh, name):
    """Same nodes, wired the same way; the same constants, the weight scales within one float32 step."""
    mine, theirs = _graph(upgraded, name), _graph(fresh, name)
    assert [(n.op_type, n.name, list(n.input), list(n.output)) for n in mine.node] == \
        [(n.op_type, n.name, list(n.input), list(n.output)) for n in theirs.node]
    a = {t.name: numpy_helper.to_array(t) for t in mine.initializer}
    b = {t.name: numpy_helper.to_array(t) for t in theirs.initializer}
    assert set(a) == set(b)
    rescaled = [k for k in a if k.endswith(".scale_b")]
    assert rescaled  # the weight scales were found and renamed
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
        if key in rescaled:
            steps = np.abs(a[key].view(np.int32).astype(np.int64) - b[key].view(np.int32).astype(np.int64))
            assert steps.max() <= 1, key
        else:
            assert np.array_equal(a[key], b[key]), key


def test_the_upgraded_bundle_decodes_like_a_fresh_export(upgraded, fresh):
    """Fed the same tokens, both give the same logits up to the scales' last bit."""
    models = [Seq2Seq.load(load_bundle(d), threads=1) for d in (upgraded, fresh)]
    bundle = load_bundle(fresh)
    tok = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                         bundle.pad_id)
    target = bundle.targets[bundle.default_target].id
    sources = [tok.encode(s, target) for s in SENTENCES]
    hyps = models[1].greedy_all(sources, 12)
    for source, hyp in zip(sources, hyps):
        ids, mask = models[1].pad([source])
        prefix = np.asarray([[bundle.decoder_start_id, *hyp.ids]], np.int64)
        logits = []
        for model in models:
            empty = model.empty_cache(1)
            logits.append(model.step(prefix, mask, empty, empty, *model.encode(ids, mask))[0])
        scale = np.abs(logits[1]).max()
        assert np.abs(logits[0] - logits[1]).max() <= 1e-5 * max(scale, 1.0)


def test_the_manifest_says_what_changed(upgraded):
    manifest = json.loads((upgraded / "bundle.json").read_text())
    assert manifest["quantization"]["activation_code_peak"] == 64
    assert "64 steps around zero point 64" in manifest["quantization"]["activations"]
    assert "weights unchanged" in manifest["upgraded"]["what"]
    assert manifest["validation"]["batch_invariance"]["before_upgrade"] is True
    assert not needs_upgrade(manifest) and needs_upgrade(load_bundle(OLD).manifest)
    load_bundle(upgraded)  # every checksum matches the rewritten files
    assert (upgraded / "README.md").is_file()  # files the manifest does not list come along


def test_upgrading_twice_changes_nothing(upgraded):
    before = _digests(upgraded)
    result = run_cli("upgrade", str(upgraded))
    assert result.returncode == 0, result.stderr.decode()
    assert "already current" in result.stdout.decode()
    assert _digests(upgraded) == before


def test_out_writes_a_new_bundle_and_leaves_the_old_one(old_copy, tmp_path):
    before = _digests(old_copy)
    out = tmp_path / "new"
    result = run_cli("upgrade", str(old_copy), "--out", str(out))
    assert result.returncode == 0, result.stderr.decode()
    assert _digests(old_copy) == before
    assert load_bundle(out).manifest["quantization"]["activation_code_peak"] == 64
    again = run_cli("upgrade", str(old_copy), "--out", str(out))  # OUT exists now
    assert again.returncode == 3 and "exists already" in again.stderr.decode()
    assert len(again.stderr.decode().strip().splitlines()) == 1 and "Traceback" not in again.stderr.decode()


def test_a_current_bundle_of_any_scheme_is_left_alone(tmp_path, tiny_int8):
    target = tmp_path / "int8"
    shutil.copytree(tiny_int8, target)
    upgrade_bundle(target)  # the fixture's fused layer norms, if it still has them
    before = _digests(target)
    result = run_cli("upgrade", str(target))
    assert result.returncode == 0 and "already current" in result.stdout.decode(), result.stderr.decode()
    assert _digests(target) == before


def test_fused_layer_norms_are_found_in_the_graphs_and_unfused(tmp_path):
    """A bundle whose manifest says it is current (64-step codes) while its graphs still hold
    SkipLayerNormalization (as the embedded bundle of 2026-12-01 was): the upgrade finds them
    in the graphs, writes them as Add and LayerNormalization, and the bundle decodes exactly
    as before. The embedded bundle itself holds none."""
    from edge_translator.core.translator import DEFAULT_MODEL, models_dir

    assert upgrade_module.fused_layer_norms(load_bundle(models_dir() / DEFAULT_MODEL)) == 0
    source = tmp_path / "current-manifest"
    shutil.copytree(OLD, source)
    manifest = json.loads((source / "bundle.json").read_text())
    manifest["quantization"]["activation_code_peak"] = 64  # the manifest claims the codes are current
    (source / "bundle.json").write_text(json.dumps(manifest))
    target = tmp_path / "upgraded"
    shutil.copytree(source, target)
    assert not needs_upgrade(load_bundle(target).manifest)
    fused = upgrade_module.fused_layer_norms(load_bundle(target))
    assert fused > 0
    report = upgrade_bundle(target)
    assert report.upgraded and report.layer_norms == fused and report.row_quantizers == 0
    assert upgrade_module.fused_layer_norms(load_bundle(target)) == 0
    assert "SkipLayerNormalization" in load_bundle(target).manifest["upgraded"]["what"]
    ops = {n.op_type for name in ("encoder", "decoder") for n in _graph(target, name).node}
    assert "SkipLayerNormalization" not in ops and "LayerNormalization" in ops
    sentences = SENTENCES + ["I would like two tickets to Shanghai, please.", "It is raining again."]
    decoded = []
    for directory in (source, target):
        bundle = load_bundle(directory)
        tokenizer = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                                   bundle.pad_id)
        sources = [tokenizer.encode(s, bundle.targets["zh-Hans"].id) for s in sentences]
        decoded.append([h.ids for h in Seq2Seq.load(bundle, threads=1).greedy_all(sources, 32)])
    assert decoded[0] == decoded[1]
    assert not upgrade_bundle(target).upgraded  # twice changes nothing


@pytest.mark.parametrize("case", ["corrupt", "missing"])
def test_bad_bundles_get_one_line_and_nothing_is_written(case, tmp_path, tiny_int8, old_copy):
    target = {"corrupt": old_copy, "missing": tmp_path / "nothing"}[case]
    if case == "corrupt":
        data = bytearray((target / "weights.bin").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (target / "weights.bin").write_bytes(bytes(data))
    before = _digests(target) if target.exists() else None
    result = run_cli("upgrade", str(target))
    assert result.returncode == 3, result.stderr.decode()
    line = result.stderr.decode().strip()
    assert len(line.splitlines()) == 1 and line.startswith("edge-translator: error:") and "Traceback" not in line
    assert {"corrupt": "sha256", "missing": str(target)}[case] in line
    assert (_digests(target) if target.exists() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"int8", "old"} & {p.name for p in tmp_path.iterdir()})


def test_a_failure_half_way_leaves_the_bundle_as_it_was(old_copy, monkeypatch):
    before = _digests(old_copy)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(upgrade_module, "save_shared", broken)
    with pytest.raises(OSError):
        upgrade_bundle(old_copy)
    assert _digests(old_copy) == before
    assert [p.name for p in old_copy.parent.iterdir()] == ["old"]  # no staging directory left behind


def test_an_old_bundle_warns_on_cpus_whose_kernels_saturate(upgraded):
    old = load_bundle(OLD).manifest
    warning = check_runtime(old, parse_cpuinfo(AVX2, "x86_64"), where="bundles/x")
    assert warning is not None and "no VNNI" in warning and "`edge-translator upgrade bundles/x`" in warning
    assert "\n" not in warning
    assert check_runtime(old, parse_cpuinfo(VNNI, "x86_64")) is None
    assert check_runtime(old, CpuInfo("x86_64", "hidden", None)) is None  # unknown: nothing assumed
    assert check_runtime(old, CpuInfo("aarch64", "Pi 5", frozenset({"asimddp"}))) is None
    assert check_runtime(load_bundle(upgraded).manifest, parse_cpuinfo(AVX2, "x86_64")) is None


def test_translate_names_the_fix_once_and_still_translates(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(AVX2)
    result = run_cli("translate", "--model", str(OLD), "Hello world.",
                     env={"EDGE_TRANSLATOR_CPUINFO": str(cpuinfo)})
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().strip()
    warnings = [line for line in result.stderr.decode().splitlines() if "edge-translator upgrade" in line]
    assert len(warnings) == 1 and str(OLD) in warnings[0]


@pytest.mark.parametrize("mode", [0o755, 0o750])
def test_an_upgrade_in_place_keeps_the_directory_readable_as_before(old_copy, mode):
    """A bundle a daemon's user reads must stay readable: the new directory takes the old one's mode."""
    old_copy.chmod(mode)
    upgrade_bundle(old_copy)
    assert old_copy.stat().st_mode & 0o7777 == mode
