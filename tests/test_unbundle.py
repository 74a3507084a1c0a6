"""unbundle: a bundle back into a transformers MarianMTModel that computes what the bundle computes."""

import json

import numpy as np
import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.core.decode import Seq2Seq
from edge_translator.core.errors import BundleError, ExportError
from edge_translator.toolchain.testmodels import english_sentences
from edge_translator.toolchain.unbundle import state_dict, unbundle

from .conftest import FIXTURES
from .ties import assert_equal_or_tie, greedy_tie, torch_next_logprobs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

INT8R = FIXTURES / "tiny-int8r-127"


def _weights(path) -> dict[str, np.ndarray]:
    transformers.utils.logging.set_verbosity_error()
    model = transformers.MarianMTModel.from_pretrained(str(path)).eval()
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}


@pytest.fixture(scope="module")
def unbundled_fp32(tmp_path_factory, tiny_fp32):
    return unbundle(tiny_fp32, tmp_path_factory.mktemp("unbundle") / "fp32")


def test_fp32_bundle_gives_back_its_source_weights(unbundled_fp32, tiny_hf, tiny_fp32):
    ours, source = _weights(unbundled_fp32), _weights(tiny_hf)
    assert set(ours) == set(source)
    worst = max(float(np.abs(ours[k] - source[k]).max()) for k in source)
    assert worst < 1e-6  # only the attention scaling, folded in and out, rounds
    for name in ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json", "generation_config.json"):
        assert (unbundled_fp32 / name).is_file(), name
    generation = json.loads((unbundled_fp32 / "generation_config.json").read_text())
    assert generation["bad_words_ids"] == [[load_bundle(tiny_fp32).pad_id]]


def test_fp32_greedy_equals_the_bundle_token_for_token(unbundled_fp32, tiny_fp32, tie_counter):
    bundle = load_bundle(tiny_fp32)
    seq = Seq2Seq.load(bundle, threads=1)
    tokenizer = transformers.MarianTokenizer.from_pretrained(str(unbundled_fp32))
    model = transformers.MarianMTModel.from_pretrained(str(unbundled_fp32)).eval()
    target = bundle.targets["zh-Hans"].id
    sentences = english_sentences(12, seed=21)
    ours = seq.greedy_all([[target] + tokenizer(s).input_ids for s in sentences], 24)
    scorer = torch_next_logprobs(model, bundle.decoder_start_id)
    for sentence, hyp in zip(sentences, ours):
        src = [target] + tokenizer(sentence).input_ids
        with torch.no_grad():
            out = model.generate(input_ids=torch.tensor([src]), num_beams=1, do_sample=False, max_new_tokens=24,
                                 max_length=None)[0].tolist()[1:]
        ended = bundle.eos_id in out
        reference = out[: out.index(bundle.eos_id)] if ended else out
        assert_equal_or_tie(tie_counter, src, hyp.ids, reference, lambda: greedy_tie(
            src, hyp.ids, reference, bundle.eos_id, scorer, hyp.stop != "length" or seq.forced_eos, ended))
    assert tie_counter.equal >= len(sentences) - 1


def test_int8r_round_trips_within_its_quantization_error(tmp_path, tiny_hf):
    # int8r stores each output channel as codes times peak / 127: dequantized, every weight
    # is within half a step of the float model it was quantized from, and not equal to it
    out = unbundle(INT8R, tmp_path / "int8r")
    ours, source = _weights(out), _weights(tiny_hf)
    errors = []
    for name, reference in source.items():
        if reference.ndim != 2 or "embed_positions" in name:
            np.testing.assert_allclose(ours[name], reference, atol=1e-6, err_msg=name)
            continue
        step = np.abs(reference).max(axis=1) / 127  # one scale per output row (HF layout [out, in])
        error = np.abs(ours[name] - reference).max(axis=1)
        assert np.all(error <= step / 2 * 1.001 + 1e-7), name
        errors.append(float((error / step).max()))
    assert 0.3 < max(errors) <= 0.501  # quantized, by up to half a step as measured


def test_unbundle_refuses_to_overwrite_without_force(tmp_path, tiny_fp32):
    out = tmp_path / "taken"
    out.mkdir()
    with pytest.raises(ExportError, match="force"):
        unbundle(tiny_fp32, out)
    assert (unbundle(tiny_fp32, out, force=True) / "model.safetensors").is_file()


def test_a_weight_the_bundle_lacks_is_named(tmp_path, tiny_fp32, monkeypatch):
    from edge_translator.toolchain import unbundle as module

    real = module.graph_tensors

    def without_fc1(bundle, graph):
        arrays, nodes = real(bundle, graph)
        arrays.pop("encoder.layers.0.fc1.bias", None)
        return arrays, nodes

    monkeypatch.setattr(module, "graph_tensors", without_fc1)
    with pytest.raises(BundleError, match="encoder.layers.0.fc1.bias"):
        state_dict(load_bundle(tiny_fp32))
