"""The numpy forward pass that export's parity check trusts, checked against transformers.

transformers in float64 is the independent cross-check: the numpy reference must give its
logits and encoder output to float64 rounding, and its greedy tokens, on the tiny model,
the large-activation model and the full opus-mt-en-zh shape. Export then proves its graphs
without importing torch or transformers at all.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from edge_translator.toolchain import reference
from edge_translator.toolchain.reference import MarianReference
from edge_translator.toolchain.statedict import read_hf_dir
from edge_translator.toolchain.validate import VALIDATION_SENTENCES

torch = pytest.importorskip("torch")  # the cross-check side only
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_hf):
    from edge_translator.toolchain import testmodels

    root = tmp_path_factory.mktemp("reference")
    return {"tiny": tiny_hf, "large": testmodels.build_large(root / "large", tiny_hf),
            "full": testmodels.build_full(root / "full")}


def _inputs(folder, sentences=VALIDATION_SENTENCES[:6], decoder_len: int = 9):
    """Padded source ids and a decoder prefix of random target ids (start id first)."""
    from transformers import MarianTokenizer

    tok = MarianTokenizer.from_pretrained(str(folder))
    batch = tok(list(sentences), return_tensors="np", padding=True, truncation=True, max_length=64)
    config = json.loads((folder / "config.json").read_text())
    rng = np.random.default_rng(0)
    dec = rng.integers(1, config["vocab_size"] - 1, size=(len(sentences), decoder_len)).astype(np.int64)
    dec[:, 0] = config["decoder_start_token_id"]
    return batch["input_ids"].astype(np.int64), batch["attention_mask"].astype(np.int64), dec


def _torch64(folder):
    return transformers.MarianMTModel.from_pretrained(str(folder)).eval().double()


@pytest.mark.parametrize("which", ["tiny", "large", "full"])
def test_float64_logits_are_transformers_float64(which, models):
    folder = models[which]
    ids, mask, dec = _inputs(folder)
    with torch.no_grad():
        out = _torch64(folder)(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                               decoder_input_ids=torch.from_numpy(dec))
    logits, hidden = MarianReference(read_hf_dir(folder), np.float64).forward(ids, mask, dec)
    theirs = out.logits.numpy()
    real = mask.astype(bool)
    scale = max(1.0, float(np.abs(theirs).max()))
    assert logits.dtype == np.float64 and logits.shape == theirs.shape
    # float64 rounding only: 1e-10 of the logits' size, where a float32 run is ~1e-6 off
    assert np.abs(logits - theirs).max() <= 1e-10 * scale
    assert np.abs(hidden - out.encoder_last_hidden_state.numpy())[real].max() <= 1e-10 * scale


@pytest.mark.parametrize("which", ["tiny", "full"])
def test_cached_decoding_equals_all_at_once(which, models):
    ids, mask, dec = _inputs(models[which])
    ref = MarianReference(read_hf_dir(models[which]), np.float64)
    full, hidden = ref.forward(ids, mask, dec)
    cache = ref.start_cache(hidden)
    stepped = np.concatenate([ref.logits(ref.decode(dec[:, t: t + 1], mask, cache)) for t in range(dec.shape[1])], 1)
    assert cache.length == dec.shape[1]
    assert np.abs(stepped - full).max() <= 1e-9 * max(1.0, float(np.abs(full).max()))


@pytest.mark.parametrize("which", ["tiny", "large", "full"])
def test_greedy_is_generate_with_pad_and_eos_held_back(which, models):
    folder = models[which]
    ids, mask, _ = _inputs(folder)
    config = json.loads((folder / "config.json").read_text())
    pad, eos, new = config["pad_token_id"], config["eos_token_id"], 12
    with torch.no_grad():
        generated = _torch64(folder).generate(
            input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask), num_beams=1, do_sample=False,
            max_new_tokens=new, min_new_tokens=new, max_length=None, bad_words_ids=[[pad]])
    ours = MarianReference(read_hf_dir(folder), np.float64).greedy(ids, mask, new, banned=(pad, eos))
    assert ours.shape == (len(ids), new)
    assert np.array_equal(ours, generated[:, :new].numpy())
    # real choices, not one token repeated (the random full-shape model settles on a few)
    assert len(np.unique(ours[:, 1:])) > (1 if which == "full" else 3)


def test_float32_reference_is_as_far_from_float64_as_torch_float32(models):
    """The bound export allows is a multiple of the float32 reference's error: it must be
    the size of PyTorch float32's on the model that amplifies rounding, not far smaller."""
    folder = models["large"]
    ids, mask, dec = _inputs(folder)
    weights = read_hf_dir(folder)
    exact, _ = MarianReference(weights, np.float64).forward(ids, mask, dec)
    single, _ = MarianReference(weights, np.float32).forward(ids, mask, dec)
    with torch.no_grad():
        theirs = transformers.MarianMTModel.from_pretrained(str(folder)).eval()(
            input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
            decoder_input_ids=torch.from_numpy(dec)).logits.numpy()
    ours_error, torch_error = np.abs(single - exact).max(), np.abs(theirs - exact).max()
    assert single.dtype == np.float32
    assert torch_error > 1e-3  # the model amplifies rounding (build_large's purpose)
    assert 0.25 * torch_error <= ours_error <= 4 * torch_error


@pytest.mark.parametrize("name", ["gelu", "gelu_new", "swish", "silu", "relu"])
def test_activations_are_transformers_own(name):
    from transformers.activations import ACT2FN

    x = np.linspace(-8, 8, 2001)
    theirs = ACT2FN[name](torch.from_numpy(x)).numpy()
    assert np.abs(reference._activation(name, x) - theirs).max() <= 1e-14


def test_export_proves_its_graphs_without_torch_or_transformers(tiny_hf, tmp_path):
    """torch and transformers made unimportable: export still reads, builds and validates."""
    out = tmp_path / "bundle"
    code = ("import sys, json; sys.modules['torch'] = None; sys.modules['transformers'] = None\n"
            "from edge_translator.toolchain.export import ExportOptions, export\n"
            "from edge_translator.toolchain.quantize import QuantizeOptions\n"
            f"export({str(tiny_hf)!r}, {str(out)!r}, ExportOptions(quantize=QuantizeOptions(mode='rowwise')))\n"
            f"print(json.load(open({str(out / 'bundle.json')!r}))['validation']['fp32_parity']['reference'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "numpy" in done.stdout
