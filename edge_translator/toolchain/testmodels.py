"""Build random Marian models locally, with real SentencePiece tokenization, for tests.

* ``tiny``: a KB-sized model (d_model 32, 2+2 layers) whose exported bundles are committed
  under ``tests/fixtures`` so runtime tests never need torch.
* ``full``: the exact opus-mt-en-zh configuration (``config.json`` of the real model) with
  random weights and the vocabulary padded to 65,001 ids, for size and speed work.
* ``large``: weights as large as trained models have (std 0.15 in the linear layers, 0.25
  in the embeddings), so that activations are large and the model amplifies rounding; for
  export-parity tests. :func:`build_full` takes the same standard deviations.

Nothing here downloads anything: the text that trains the SentencePiece models is
generated from a fixed seed.
"""

from __future__ import annotations

import io
import json
import logging
import random
from pathlib import Path

from ..core.errors import require

logger = logging.getLogger(__name__)

LANGUAGE_TOKENS = (">>cmn_Hans<<", ">>cmn_Hant<<")
#: The real Helsinki-NLP/opus-mt-en-zh ``config.json`` and ``generation_config.json``.
REFERENCE_CONFIG = Path(__file__).resolve().parent / "reference" / "opus-mt-en-zh"
# A few hundred common English words; enough for SentencePiece to learn real sub-words.
ENGLISH_WORDS = """
the of and to a in is it you that he was for on are with as I his they be at one have this
from or had by hot word but what some we can out other were all there when up use your how
said an each she which do their time if will way about many then them write would like so
these her long make thing see him two has look more day could go come did number sound no
most people my over know water than call first who may down side been now find any new work
part take get place made live where after back little only round man year came show every
good me give our under name very through just form sentence great think say help low line
differ turn cause much mean before move right boy old too same tell does set three want air
well also play small end put home read hand port large spell add even land here must big high
such follow act why ask men change went light kind off need house picture try us again animal
point mother world near build self earth father head stand own page should country found
answer school grow study still learn plant cover food sun four between state keep eye never
last let thought city tree cross farm hard start might story saw far sea draw left late run
while press close night real life few north open seem together next white children begin got
walk example ease paper group always music those both mark often letter until mile river car
feet care second book carry took science eat room friend began idea fish mountain stop once
base hear horse cut sure watch color face wood main enough plain girl usual young ready above
ever red list though feel talk bird soon body dog family direct pose leave song measure door
product black short numeral class wind question happen complete ship area half rock order fire
south problem piece told knew pass since top whole king space heard best hour better true
during hundred five remember step early hold west ground interest reach fast verb sing listen
six table travel less morning ten simple several vowel toward war lay against pattern slow
center love person money serve appear road map rain rule govern pull cold notice voice unit
power town fine certain fly fall lead cry dark machine note wait plan figure star box noun
field rest correct able pound done beauty drive stood contain front teach week final gave green
oh quick develop ocean warm free minute strong special mind behind clear tail produce fact
street inch multiply nothing course stay wheel full force blue object decide surface deep moon
island foot system busy test record boat common gold possible plane stead dry wonder laugh
thousand ago ran check game shape equate miss brought heat snow tire bring yes distant fill
east paint language among train station where is hotel doctor price please thank ticket
""".split()
NAMES = "Alice Bob Mr. Smith Dr. Chen Paris London Beijing Monday Tom Mary U.S. NASA".split()
PUNCT = [".", ".", ".", "?", "!", ",", ";", ":"]


def english_sentences(count: int, seed: int) -> list[str]:
    """Generate English-like sentences (words, names, numbers, punctuation)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = []
        for _ in range(rng.randint(3, 18)):
            roll = rng.random()
            if roll < 0.06:
                words.append(rng.choice(NAMES))
            elif roll < 0.11:
                words.append(rng.choice([str(rng.randint(0, 2000)), f"{rng.randint(0, 99)}.{rng.randint(0, 9)}",
                                         f"${rng.randint(1, 500)}", f"{rng.randint(1, 9)},000"]))
            else:
                words.append(rng.choice(ENGLISH_WORDS))
            if rng.random() < 0.08:
                words[-1] += ","
        sentence = " ".join(words)
        out.append(sentence[0].upper() + sentence[1:] + rng.choice(PUNCT[:5]))
    return out


def chinese_sentences(count: int, seed: int, chars: int = 1500) -> list[str]:
    """Generate Chinese-like sentences from the first ``chars`` CJK ideographs."""
    rng = random.Random(seed)
    alphabet = [chr(0x4E00 + i) for i in range(chars)]
    weights = [1.0 / (i + 10) for i in range(chars)]  # Zipf-like, so pieces form
    out = []
    for _ in range(count):
        body = "".join(rng.choices(alphabet, weights, k=rng.randint(4, 30)))
        if rng.random() < 0.2:
            cut = rng.randint(1, len(body) - 1)
            body = body[:cut] + "，" + body[cut:]
        if rng.random() < 0.1:
            body += str(rng.randint(0, 999))
        out.append(body + rng.choice(["。", "。", "？", "！"]))
    return out


def pseudo_translation(sentence: str, chars: int = 300) -> str:
    """A deterministic word-by-word "Chinese" rendering of an English-like sentence.

    Each word maps to one to three ideographs chosen by a stable hash, so a model
    trained on these pairs learns input-dependent output of the right length.
    """
    out = []
    for word in sentence.split():
        core = word.strip(".,?!;:").lower()
        code = sum((i + 1) * ord(c) for i, c in enumerate(core)) if core else 0
        out.extend(chr(0x4E00 + (code * (k + 7)) % chars) for k in range(1 + code % 3))
        if word.endswith(","):
            out.append("，")
    end = {"?": "？", "!": "！"}.get(sentence[-1:], "。")
    return "".join(out) + end


def _teach(model, tokenizer, pairs: list[tuple[str, str]], steps: int, seed: int) -> None:
    """Train ``model`` briefly on ``pairs`` so that greedy output varies with the input."""
    torch = require("torch", "export")
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        batch = rng.sample(pairs, 32)
        enc = tokenizer([f">>cmn_Hans<< {en}" for en, _ in batch],
                        text_target=[zh for _, zh in batch], return_tensors="pt", padding=True)
        enc["labels"][enc["labels"] == tokenizer.pad_token_id] = -100
        loss = model(**enc).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            logger.info("tiny model step %d loss %.3f", step, loss.item())
    model.eval()


def train_spm(sentences: list[str], vocab_size: int, coverage: float, seed: int) -> bytes:
    """Train a unigram SentencePiece model in memory and return its serialized bytes."""
    spm = require("sentencepiece", "export")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=vocab_size,
        model_type="unigram", character_coverage=coverage, normalization_rule_name="nmt_nfkc",
        hard_vocab_limit=False, num_threads=1, seed_sentencepiece_size=100_000,
        shuffle_input_sentence=False, minloglevel=2,
        unk_piece="<unk>", bos_id=-1, eos_id=1, unk_id=0, eos_piece="</s>", pad_id=-1,
    )
    return model.getvalue()


def spm_pieces(model: bytes) -> list[str]:
    """The pieces of a serialized SentencePiece model, special pieces excluded."""
    spm = require("sentencepiece", "export")
    proc = spm.SentencePieceProcessor(model_proto=model)
    return [proc.id_to_piece(i) for i in range(proc.get_piece_size())
            if not (proc.is_unknown(i) or proc.is_control(i))]


def joint_vocab(source: bytes, target: bytes, size: int | None = None) -> dict[str, int]:
    """Marian's joint vocabulary: ``</s>``=0, ``<unk>``=1, language tokens, pieces, ``<pad>`` last.

    Args:
        source: Serialized source SentencePiece model.
        target: Serialized target SentencePiece model.
        size: Pad with unused ``<extra_N>`` tokens to this many ids (``<pad>`` included).
    """
    vocab = {"</s>": 0, "<unk>": 1}
    for token in LANGUAGE_TOKENS:
        vocab[token] = len(vocab)
    for piece in spm_pieces(source) + spm_pieces(target):
        vocab.setdefault(piece, len(vocab))
    if size is not None:
        if len(vocab) >= size:
            raise ValueError(f"vocabulary already has {len(vocab)} ids, more than {size}")
        extra = 0
        while len(vocab) < size - 1:
            vocab[f"<extra_{extra}>"] = len(vocab)
            extra += 1
    vocab["<pad>"] = len(vocab)
    return vocab


def write_tokenizer(out: Path, source: bytes, target: bytes, vocab: dict[str, int], max_len: int) -> None:
    """Write the Marian tokenizer files (two spm models, vocab.json, tokenizer_config.json)."""
    (out / "source.spm").write_bytes(source)
    (out / "target.spm").write_bytes(target)
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=0), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "MarianTokenizer", "source_lang": "en", "target_lang": "zh",
        "model_max_length": max_len, "separate_vocabs": False,
    }, indent=2), encoding="utf-8")


def _generation_config(config) -> dict:
    return {
        "bad_words_ids": [[config.pad_token_id]], "bos_token_id": 0,
        "decoder_start_token_id": config.decoder_start_token_id, "eos_token_id": config.eos_token_id,
        "forced_eos_token_id": config.eos_token_id, "max_length": config.max_position_embeddings,
        "num_beams": 1, "pad_token_id": config.pad_token_id,
    }


def build_tiny(out: str | Path, seed: int = 0, d_model: int = 32, layers: int = 2, heads: int = 4,
               ffn: int = 64, max_positions: int = 128, source_vocab: int = 400,
               target_vocab: int = 500, train_steps: int = 300) -> Path:
    """Build the tiny Marian model with real tokenizers into ``out``.

    Its weights start random and are trained for ``train_steps`` steps on generated
    word-by-word pairs, so that greedy output depends on the input and ends with
    ``</s>`` at varied lengths: a model that repeats one token would let decoding bugs
    through parity tests.

    Returns:
        The model directory, loadable with ``MarianMTModel.from_pretrained``.
    """
    torch = require("torch", "export")
    transformers = require("transformers", "export")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    english = english_sentences(4000, seed)
    chinese = chinese_sentences(2000, seed + 1, chars=300) + [pseudo_translation(e) for e in english[:2000]]
    source = train_spm(english, source_vocab, 1.0, seed)
    target = train_spm(chinese, target_vocab, 0.9995, seed)
    vocab = joint_vocab(source, target)
    pad = vocab["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(vocab), d_model=d_model,
        encoder_layers=layers, decoder_layers=layers, encoder_attention_heads=heads,
        decoder_attention_heads=heads, encoder_ffn_dim=ffn, decoder_ffn_dim=ffn,
        max_position_embeddings=max_positions, activation_function="swish", scale_embedding=True,
        share_encoder_decoder_embeddings=True, tie_word_embeddings=True, init_std=0.1,
        pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad, forced_eos_token_id=0,
        bos_token_id=0, static_position_embeddings=True, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0,
    )
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(config).eval()
    write_tokenizer(out, source, target, vocab, max_positions)
    if train_steps:
        tokenizer = transformers.MarianTokenizer.from_pretrained(str(out))
        _teach(model, tokenizer, [(e, pseudo_translation(e)) for e in english], train_steps, seed)
    with torch.no_grad():
        # A non-zero bias checks that exports carry it.
        bias = torch.randn(1, len(vocab), generator=torch.Generator().manual_seed(seed)) * 0.1
        model.final_logits_bias.add_(bias)
    model.save_pretrained(str(out))
    (out / "generation_config.json").write_text(json.dumps(_generation_config(config), indent=2))
    return out


#: Standard deviations of the large-weights models: (linear layers, embeddings).
LARGE_WEIGHT_STD = (0.15, 0.25)


def enlarge_weights(model, linear_std: float, embed_std: float, seed: int = 0) -> None:
    """Redraw a Marian model's linear and token-embedding weights with these standard deviations.

    Biases, layer norms and the sinusoidal positions are left as they are. With std 0.15
    a d_model-512 layer multiplies activations by about 3, so the residual stream grows
    layer by layer, attention saturates, and float32 rounding reaches the logits amplified.
    """
    torch = require("torch", "export")
    generator = torch.Generator().manual_seed(seed)
    output = model.get_output_embeddings()
    # one matrix when tied: the encoder and decoder lookup and the output layer
    embeddings = {w.data_ptr(): w for w in (model.get_input_embeddings().weight, output.weight)}
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and module is not output:
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * linear_std)
        for weight in embeddings.values():
            weight.copy_(torch.randn(weight.shape, generator=generator) * embed_std)


def build_large(out: str | Path, tokenizer: str | Path, seed: int = 0, d_model: int = 512, layers: int = 2,
                heads: int = 8, ffn: int = 1024, max_positions: int = 128,
                std: tuple[float, float] = LARGE_WEIGHT_STD) -> Path:
    """Build a random Marian model with large weights, reusing another model's tokenizer.

    With the default shape (2+2 layers of the full model's width) and the tiny fixture's
    tokenizer, PyTorch float32 lies about 8e-3 from float64 in logits and correct FP32
    graphs about 1e-3 from PyTorch float32: the problem of the full-shape model, in seconds.

    Args:
        out: Directory to write.
        tokenizer: A Marian model directory whose ``source.spm``, ``target.spm`` and
            ``vocab.json`` are copied (the tiny fixture will do).
        seed: Seed of the random weights.
        d_model, layers, heads, ffn, max_positions: The architecture (layers on each side).
        std: Standard deviations of the linear and embedding weights.

    Returns:
        The model directory, loadable with ``MarianMTModel.from_pretrained``.
    """
    torch = require("torch", "export")
    transformers = require("transformers", "export")
    out, tokenizer = Path(out), Path(tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    vocab = json.loads((tokenizer / "vocab.json").read_text(encoding="utf-8"))
    write_tokenizer(out, (tokenizer / "source.spm").read_bytes(), (tokenizer / "target.spm").read_bytes(),
                    vocab, max_positions)
    pad = vocab["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(vocab), d_model=d_model, encoder_layers=layers,
        decoder_layers=layers, encoder_attention_heads=heads, decoder_attention_heads=heads,
        encoder_ffn_dim=ffn, decoder_ffn_dim=ffn, max_position_embeddings=max_positions,
        activation_function="swish", scale_embedding=True, share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True, pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad,
        forced_eos_token_id=0, bos_token_id=0, static_position_embeddings=True,
    )
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(config).eval()
    enlarge_weights(model, *std, seed=seed)
    model.save_pretrained(str(out))
    (out / "generation_config.json").write_text(json.dumps(_generation_config(config), indent=2))
    return out


def build_full(out: str | Path, reference: str | Path | None = None, seed: int = 0,
               std: tuple[float, float] | None = None) -> Path:
    """Build a random model with the exact opus-mt-en-zh configuration into ``out``.

    Args:
        out: Directory to write.
        reference: Directory holding the real model's ``config.json`` and
            ``generation_config.json``; ``None`` uses the copy shipped with the toolchain
            (:data:`REFERENCE_CONFIG`).
        seed: Seed of the random weights and tokenizer text.
        std: Standard deviations of the linear and embedding weights (for example
            :data:`LARGE_WEIGHT_STD`); ``None`` keeps transformers' initialization (0.02).
    """
    torch = require("torch", "export")
    transformers = require("transformers", "export")
    out, reference = Path(out), Path(reference or REFERENCE_CONFIG)
    out.mkdir(parents=True, exist_ok=True)
    config = transformers.MarianConfig.from_dict(json.loads((reference / "config.json").read_text()))
    source = train_spm(english_sentences(30000, seed), 8000, 1.0, seed)
    target = train_spm(chinese_sentences(30000, seed + 1, chars=4000), 8000, 0.9995, seed)
    vocab = joint_vocab(source, target, size=config.vocab_size)
    if vocab["<pad>"] != config.pad_token_id:
        raise ValueError(f"<pad> got id {vocab['<pad>']}, config expects {config.pad_token_id}")
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(config).eval()
    if std is not None:
        enlarge_weights(model, *std, seed=seed)
    model.save_pretrained(str(out))
    generation = reference / "generation_config.json"
    if generation.is_file():
        (out / "generation_config.json").write_text(generation.read_text())
    write_tokenizer(out, source, target, vocab, config.max_position_embeddings)
    return out
