"""The exact opus-mt-en-zh shape (random weights): bundle size, parity, and greedy equality.

These build a 78 M-parameter model and export it twice, so they take a few minutes.
"""

import json

import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.core.decode import Seq2Seq
from edge_translator.core.tokenizer import Tokenizer
from edge_translator.toolchain.testmodels import english_sentences

from .conftest import REFERENCE, run_cli
from .ties import assert_equal_or_tie, greedy_tie, torch_next_logprobs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow
MAX_INT8_BYTES = 85_000_000
#: The quantization issue's goal for the 4-bit bundle of the full shape.
MAX_Q4_BYTES = 50_000_000


@pytest.fixture(scope="module")
def full_hf(tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "hf"
    result = run_cli("test-model", "full", str(out))  # the configuration shipped with the toolchain
    assert result.returncode == 0, result.stderr.decode()
    return out


def test_full_model_matches_reference_config(full_hf):
    config = json.loads((full_hf / "config.json").read_text())
    reference = json.loads((REFERENCE / "config.json").read_text())
    for key in ("d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads", "encoder_ffn_dim",
                "vocab_size", "pad_token_id", "decoder_start_token_id", "activation_function",
                "max_position_embeddings", "scale_embedding"):
        assert config[key] == reference[key], key
    vocab = json.loads((full_hf / "vocab.json").read_text())
    assert len(vocab) == 65001 and vocab["<pad>"] == 65000 and ">>cmn_Hans<<" in vocab


def _export(full_hf, out, scheme):
    """Export the full shape with one scheme; return the bundle and its total size in bytes."""
    result = run_cli("export", str(full_hf), str(out), "--quantize", scheme)
    assert result.returncode == 0, result.stderr.decode()
    bundle = load_bundle(out)
    assert bundle.manifest["validation"]["int8_check"]["passed"]
    return bundle, sum(record["size"] for record in bundle.manifest["files"].values())


def test_int8_bundle_size_and_parity(full_hf, tmp_path):
    bundle, total = _export(full_hf, tmp_path / "int8", "int8")
    assert total <= MAX_INT8_BYTES, total
    assert (fp32 := bundle.manifest["validation"]["fp32_parity"])["max_abs_logit_diff"] <= fp32["allowed_abs_logit_diff"]


def test_q4_bundle_of_the_full_shape_fits_50_mb(full_hf, tmp_path):
    bundle, total = _export(full_hf, tmp_path / "q4", "q4")
    assert total <= MAX_Q4_BYTES, total
    assert bundle.quantization["mode"] == "q4"
    # the 65,001 x 512 embedding is stored once: the lookup and the output layer share its bytes
    assert bundle.manifest["storage"]["stored_bytes"] < bundle.manifest["storage"]["referenced_bytes"] - 15_000_000


def test_fp32_greedy_equals_generate_on_200_sentences(full_hf, tmp_path, tie_counter):
    out = tmp_path / "fp32"
    result = run_cli("export", str(full_hf), str(out), "--quantize", "none")
    assert result.returncode == 0, result.stderr.decode()
    bundle = load_bundle(out)
    tok = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                         bundle.pad_id)
    seq = Seq2Seq.load(bundle)
    model = transformers.MarianMTModel.from_pretrained(str(full_hf)).eval()
    target = bundle.targets["zh-Hans"].id
    sources = [tok.encode(s, target) for s in english_sentences(200, seed=21)]
    scorer = torch_next_logprobs(model, bundle.decoder_start_id)
    new_tokens = 12
    for start in range(0, len(sources), 50):
        batch = sources[start:start + 50]
        ours = seq.greedy_all(batch, new_tokens)
        ids, mask = seq.pad(batch)
        with torch.no_grad():
            ref = model.generate(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                                 num_beams=1, do_sample=False, max_new_tokens=new_tokens, max_length=None)
        for src, hyp, row in zip(batch, ours, ref.tolist()):
            row = row[1:]
            ended = bundle.eos_id in row
            if ended:
                row = row[: row.index(bundle.eos_id)]
            hyp_ended = hyp.stop == "eos" or (hyp.stop == "length" and seq.forced_eos)
            assert_equal_or_tie(tie_counter, src, hyp.ids, row, lambda: greedy_tie(
                src, hyp.ids, row, bundle.eos_id, scorer, hyp_ended, ended))
    assert tie_counter.equal >= len(sources) * 0.95
