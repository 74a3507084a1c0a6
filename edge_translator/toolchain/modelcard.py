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
edge-translator itself, on a 2-core CPU, on {train_pairs:,} pairs: {kinds_text}
({source_counts}). It ships inside edge-translator so that a fresh, offline install
translates out of the box. It is a demo: {knows_text}. For real work, export the production
model opus-mt-en-zh (below).

- Direction: English → Chinese. {targets_text}
- Tokenization: separate SentencePiece models (English {source_vocab} pieces, Chinese
  {target_vocab} pieces), joint vocabulary of {vocab} ids, `<pad>` last, opus-mt's `>>id<<` prefix.
- Bundle: {scheme_text}, {size_mb} MB.
- Training: {epochs} epochs, {minutes} minutes of training on 2 CPU cores, seed {seed};
  {dev_text}
- The source of the model: {checkpoint_text}
- Single words: {words_text}

Rebuild it (extra `train`; resumable, so the {minutes} minutes may be spread over several runs):

{rebuild_text}

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

Reproduce: `edge-translator schemes models/checkpoints/{name} --pairs assets/eval/tatoeba-cmn-eng-test.tsv`
(extras `export`, `eval`; the float16 checkpoint is read back as float32), or one row:
`edge-translator eval models/{name} --pairs assets/eval/tatoeba-cmn-eng-test.tsv`.

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

{attribution}
- The model weights are released under {weights_licence}, with the same attribution.
- OpenCC (Apache-2.0) converted the Chinese text to Simplified (`t2s`) and made the
  Traditional targets (`s2tw`).

## Production quality: export opus-mt-en-zh

On a machine with internet and the `export` extra:

    edge-translator export Helsinki-NLP/opus-mt-en-zh bundles/opus-mt-en-zh-q8
    EDGE_TRANSLATOR_MODEL=bundles/opus-mt-en-zh-q8 edge-translator translate "Hello."

Published figures for opus-mt-en-zh: Tatoeba-test BLEU 31.4, Flores-200 devtest spBLEU 27.9.
"""


def write_model_card(bundle_dir: Path, work: Path, name: str, checkpoint: Path | None = None) -> Path:
    """Render ``README.md`` into the bundle directory from the training run's JSON files.

    ``checkpoint`` is where the float16 training checkpoint was kept, if it was; the card
    names it as the preferred form for changing the model.
    """
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
    words_path = work / "words.json"
    software = stats.get("software")
    text = TEMPLATE.format(
        kinds_text="short conversational sentences, dictionary words and phrases"
                   + (" and software interface text" if software else ""),
        knows_text=("it knows everyday Tatoeba-style sentences, common words and the short strings of\n"
                    "desktop software, and it will fail on long or unusual text") if software else
                   ("it knows everyday Tatoeba-style sentences and common words, and it will fail\n"
                    "on technical, long or unusual text"),
        dev_text=_dev_text(history, options), rebuild_text=_rebuild_text(name, options, software),
        source_counts=_source_counts(stats["sources"]), targets_text=_targets_text(manifest),
        checkpoint_text=_checkpoint_text(checkpoint),
        words_text=_words_text(json.loads(words_path.read_text(encoding="utf-8")) if words_path.is_file() else None),
        attribution=_attribution(stats["sources"], software), weights_licence=_weights_licence(stats["sources"]),
        name=name, parameters=manifest["model"]["parameters"] / 1e6, d_model=options["d_model"],
        encoder_layers=options["encoder_layers"], decoder_layers=options["decoder_layers"],
        heads=options["heads"], ffn=options["ffn"], train_pairs=stats["train"], source_vocab=options["source_vocab"],
        target_vocab=options["target_vocab"], vocab=len(vocab), scheme_text=scheme_text,
        size_mb=chosen["size_mb"], epochs=last.get("epoch", "?"), minutes=last.get("minutes", "?"),
        seed=options["seed"],
        test_pairs=stats["test"], signature=chosen["signature"], pt_bleu=r["pytorch_fp32"]["bleu"],
        pt_chrf=r["pytorch_fp32"]["chrf"], batch_size=r["batch_size"], cpu=r.get("cpu", "this machine"),
        table="\n".join(render_table(r)), choice=r["choice"], why=r["why"][0].upper() + r["why"][1:],
    )
    path = bundle_dir / "README.md"
    path.write_text(text, encoding="utf-8")
    return path


def _dev_text(history: dict, options: dict) -> str:
    """The kept checkpoint's dev BLEU, and the software split's when the run had one."""
    best = history.get("best") or {"dev_bleu": history["best_dev_bleu"]}
    text = f"best dev BLEU {best['dev_bleu']} (greedy, {options['dev_size']} Tatoeba dev pairs)"
    if best.get("software_bleu") is not None:
        text += (f" and software dev BLEU\n  {best['software_bleu']} (the held-out packages' dev split); the "
                 "checkpoint kept is the best by their mean")
    return text + "."


def _rebuild_text(name: str, options: dict, software: dict | None) -> str:
    shape = (f"w{options['d_model']},e{options['encoder_layers']},d{options['decoder_layers']},h{options['heads']},"
             f"ffn{options['ffn']},sv{options['source_vocab']},tv{options['target_vocab']}")
    lines = []
    if software:
        lines.append("    edge-translator harvest-software work/software      # Debian, see docs/models.md")
    lines.append(f"    edge-translator train-demo models/{name} --work work/train-demo --evaluate --force \\")
    flags = f"--shape {shape}" + (f" --software-share {options['software_share']:g}"
                                  if options.get("software_share", 1.0) != 1.0 else "")
    lines.append(f"        {flags} {'--software work/software' if software else '--no-software'} \\")
    lines.append(f"        --heldout assets/eval/cedict-heldout.tsv --checkpoint models/checkpoints/{name}")
    return "\n".join(lines)


def _source_counts(sources: list[dict]) -> str:
    return ", ".join(f"{s['name']} {s['pairs']:,}" for s in sources)


def _targets_text(manifest: dict) -> str:
    if "zh-Hant" in manifest.get("targets", {}):
        return ("Simplified by default (`>>cmn_Hans<<`) and Traditional with `--target zh-Hant`\n"
                "  (`>>cmn_Hant<<`), as opus-mt-en-zh does: each epoch gives a share of the pairs with\n"
                "  their OpenCC `s2tw` Traditional target.")
    return ("Simplified only (`>>cmn_Hans<<`): all Chinese training text was converted with\n"
            "  OpenCC `t2s`, and `--target zh-Hant` is not offered.")


def _checkpoint_text(checkpoint: Path | None) -> str:
    if checkpoint is None:
        return "the training checkpoint was not kept with this bundle."
    return (f"the best dev checkpoint is kept in float16 safetensors, with its tokenizer files, in\n"
            f"  `{checkpoint.as_posix()}` (a Hugging Face MarianMT folder). It is the preferred form for\n"
            "  changing the model: fine-tune it, build shortlists from it, or export it again with\n"
            f"  `edge-translator export {checkpoint.as_posix()} BUNDLE` (read back as float32).")


def _words_text(words: dict | None) -> str:
    if not words:
        return "not measured (pass `--heldout` to train-demo)."
    return (f"{words['right']} of {words['words']} right ({words['accuracy']:.1%}) on the held-out CC-CEDICT\n"
            "  sample `assets/eval/cedict-heldout.tsv` (common HSK headwords whose entries are kept out\n"
            "  of training). A word is right when the greedy output of the bare English word, without\n"
            "  punctuation, is the headword of any CC-CEDICT entry that lists that word as a gloss.")


def _attribution(sources: list[dict], software: dict | None = None) -> str:
    lines = []
    for s in sources:
        if software and s["name"] == SOFTWARE_NAME:
            continue
        lines.append(f"- [{s['name']}]({s['url']}): {s['licence']}, as packaged in the PyPI package "
                     f"`{s['package']}`; {s['pairs']:,} training pairs.")
    lines.append("- The test and dev splits are Tatoeba's (CC BY 2.0 FR, © Tatoeba contributors).")
    if software:
        lines.append(_software_attribution(software))
    return "\n".join(lines)


#: The ``stats.json`` source entry of the software harvest (:data:`.traindata.SOFTWARE_SOURCE`).
SOFTWARE_NAME = "Debian software translations"


def _software_attribution(software: dict) -> str:
    """The software packages grouped by the licence of their translations, then the held-out ones."""
    groups: dict[str, list[dict]] = {}
    for package in software["packages"]:
        groups.setdefault(package["translations"], []).append(package)
    total = sum(p["pairs"] for p in software["packages"])
    lines = [f"- Software translations: {total:,} training pairs from the zh_CN and zh_TW gettext catalogs and "
             f"translated help pages of {len(software['packages'])} Debian ({software.get('debian') or 'bookworm'}) "
             "source packages, gathered by `edge-translator harvest-software`; each package's translations keep "
             "its licence (that of the translations in its `debian/copyright`). Package version (pairs), by licence:"]
    for licence, packages in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        listed = ", ".join(f"{p['name']} {p['version']} ({p['pairs']:,})" for p in sorted(packages,
                                                                                        key=lambda p: p["name"]))
        lines.append(f"  - {licence}: {listed}.")
    for split in ("test", "dev"):
        held = [p for p in software.get("heldout", []) if p["split"] == split]
        if held:
            listed = ", ".join(f"{p['name']} {p['version']} ({p['translations']}, {p['pairs']:,} pairs)"
                               for p in held)
            lines.append(f"- The software {split} split, held out whole (none of its text, English or Chinese, is "
                         f"in training): {listed}.")
    return "\n".join(lines)


def _weights_licence(sources: list[dict]) -> str:
    """CC BY-SA data passes its share-alike terms to the weights; otherwise Tatoeba's licence."""
    licences = {s["licence"] for s in sources}
    return "CC BY-SA 4.0" if "CC BY-SA 4.0" in licences else "CC BY 2.0 FR"
