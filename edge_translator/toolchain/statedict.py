"""A Hugging Face MarianMT folder read into :class:`.marian.MarianWeights` with numpy alone.

``config.json`` gives the shape (with MarianConfig's defaults for what it leaves out); the
weights come from ``model.safetensors`` (its few-line format is read here: an 8-byte header
length, a JSON header, the raw tensors; float16 and bfloat16 are widened to float32), from a
sharded ``model.safetensors.index.json``, or from ``pytorch_model.bin`` through the
restricted reader of :mod:`.ptzip`. The names are transformers' own (``model.shared.weight``,
``model.encoder.layers.0.self_attn.q_proj.weight``, ...). Marian's sinusoidal position
tables, which checkpoints usually leave out, are computed as transformers computes them.
"""

from __future__ import annotations

import json
import logging
import struct
from pathlib import Path

import numpy as np

from ..core.errors import ExportError
from .marian import ACTIVATIONS, MarianShape, MarianWeights

logger = logging.getLogger(__name__)

#: safetensors dtype names → numpy (bfloat16 is read as uint16 and widened).
SAFETENSORS_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
                      "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
MAX_HEADER_BYTES = 100 << 20
#: MarianConfig's defaults, for the keys a config.json may leave out.
CONFIG_DEFAULTS = {"activation_function": "gelu", "scale_embedding": False, "share_encoder_decoder_embeddings": True,
                   "tie_word_embeddings": True, "max_position_embeddings": 1024, "eos_token_id": 0,
                   "pad_token_id": 58100, "decoder_start_token_id": 58100}
#: torch's LayerNorm epsilon, which transformers' Marian layers use.
LAYER_NORM_EPS = 1e-5


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of one ``.safetensors`` file (float16 and bfloat16 as float32).

    Raises:
        ExportError: One line when the file is missing, truncated or its header lies.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ExportError(f"{path} cannot be read ({exc.strerror or exc})") from None
    if len(data) < 8:
        raise ExportError(f"{path} is truncated ({len(data)} bytes); download it again")
    (length,) = struct.unpack("<Q", data[:8])
    if length > min(MAX_HEADER_BYTES, len(data) - 8):
        raise ExportError(f"{path} is truncated or not a safetensors file (a header of {length} bytes); download it "
                          "again")
    try:
        header = json.loads(data[8:8 + length])
    except (ValueError, UnicodeDecodeError):
        raise ExportError(f"{path}: its safetensors header is not JSON; the file is corrupt, download it again") from None
    if not isinstance(header, dict):
        raise ExportError(f"{path}: its safetensors header is not an object; the file is corrupt")
    body = memoryview(data)[8 + length:]
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = np.dtype(SAFETENSORS_DTYPES[spec["dtype"]]).newbyteorder("<")
            shape = tuple(int(n) for n in spec["shape"])
            start, end = (int(x) for x in spec["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise ExportError(f"{path}: the header entry of {name} is not one this reader knows "
                              f"({str(spec)[:80]})") from None
        count = int(np.prod(shape)) if shape else 1
        if not 0 <= start <= end <= len(body) or end - start != count * dtype.itemsize:
            raise ExportError(f"{path}: {name} lies outside the file or has the wrong size; the file is truncated "
                              "or corrupt, download it again")
        array = np.frombuffer(body[start:end], dtype=dtype).reshape(shape)
        if spec["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        elif array.dtype.kind == "f" and array.dtype.itemsize < 4:
            array = array.astype(np.float32)
        out[name] = array.astype(array.dtype.newbyteorder("="), copy=True)
    return out


def read_state_dict(folder: Path) -> dict[str, np.ndarray]:
    """The weights of a Hugging Face model folder, in whichever form it has them."""
    single, index, torch_file = folder / "model.safetensors", folder / "model.safetensors.index.json", \
        folder / "pytorch_model.bin"
    if single.is_file():
        return read_safetensors(single)
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise ExportError(f"{index} is not a safetensors index (a 'weight_map' object)") from None
        state = {}
        for shard in shards:
            if Path(shard).name != shard:
                raise ExportError(f"{index} names the shard {shard!r} outside its folder")
            state.update(read_safetensors(folder / shard))
        return state
    if torch_file.is_file():
        from .ptzip import read_torch_zip

        return read_torch_zip(torch_file)
    raise ExportError(f"{folder} has no model.safetensors or pytorch_model.bin weights")


def shape_from_config(config: dict, where: str) -> MarianShape:
    """:class:`.marian.MarianShape` from a ``config.json`` dictionary, checked.

    Raises:
        ExportError: A model that is not Marian, or a feature the graph builder lacks.
    """
    c = {**CONFIG_DEFAULTS, **config}
    if c.get("model_type") != "marian":
        raise ExportError(f"{where} is a {c.get('model_type', 'unknown')!r} model, not a MarianMT model "
                          "(config.json model_type must be 'marian')")
    if c["activation_function"] not in ACTIVATIONS:
        raise ExportError(f"{where}: activation_function {c['activation_function']!r} is not supported; supported: "
                          f"{', '.join(ACTIVATIONS)}")
    try:
        d_model, vocab = int(c["d_model"]), int(c["vocab_size"])
        heads = (int(c["encoder_attention_heads"]), int(c["decoder_attention_heads"]))
        shape = MarianShape(
            d_model=d_model, encoder_layers=int(c["encoder_layers"]), decoder_layers=int(c["decoder_layers"]),
            encoder_heads=heads[0], decoder_heads=heads[1], encoder_ffn=int(c["encoder_ffn_dim"]),
            decoder_ffn=int(c["decoder_ffn_dim"]), vocab_size=vocab,
            decoder_vocab_size=vocab if c["share_encoder_decoder_embeddings"] else int(c.get("decoder_vocab_size")
                                                                                       or vocab),
            max_positions=int(c["max_position_embeddings"]), activation=c["activation_function"],
            scale_embedding=bool(c["scale_embedding"]), layer_norm_eps=LAYER_NORM_EPS,
            pad_id=int(c["pad_token_id"]), eos_id=int(c["eos_token_id"]),
            decoder_start_id=int(c["decoder_start_token_id"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ExportError(f"{where}: config.json lacks or garbles {exc}; it is not a complete MarianMT config") from None
    if d_model % heads[0] or d_model % heads[1]:
        raise ExportError(f"{where}: d_model must be divisible by the number of attention heads")
    return shape


def sinusoidal_positions(positions: int, dim: int) -> np.ndarray:
    """Marian's position table as transformers builds it: float64 angles, sines in the first
    half of the columns and cosines in the second, rounded once to float32."""
    angles = np.arange(positions, dtype=np.float64)[:, None] / np.power(
        10000, 2 * (np.arange(dim) // 2) / dim)[None, :]
    half = dim // 2 if dim % 2 == 0 else dim // 2 + 1
    out = np.empty((positions, dim), dtype=np.float32)
    out[:, :half] = np.sin(angles[:, 0::2])
    out[:, half:] = np.cos(angles[:, 1::2])
    return out


def _take(state: dict, name: str, where: str, shape: tuple | None = None) -> np.ndarray:
    try:
        array = state[name]
    except KeyError:
        raise ExportError(f"{where}: the weights lack {name}; this is not a complete MarianMT checkpoint") from None
    if shape is not None and tuple(array.shape) != shape:
        raise ExportError(f"{where}: {name} has shape {tuple(array.shape)}, the config implies {shape}")
    return np.ascontiguousarray(array, dtype=np.float32)


def weights_from_state_dict(state: dict[str, np.ndarray], config: dict, where: str) -> MarianWeights:
    """:class:`.marian.MarianWeights` from transformers' parameter names (linear weights
    transposed to [in, out]; equal embedding matrices shared as one array).

    Raises:
        ExportError: A missing tensor or a shape the config does not imply, named.
    """
    shape = shape_from_config(config, where)
    d, prefix = shape.d_model, "model."
    if not any(k.startswith(prefix) for k in state):
        prefix = ""  # a bare MarianModel's names
    shared = state.get(f"{prefix}shared.weight")
    decoder_embed = state.get(f"{prefix}decoder.embed_tokens.weight", shared)
    encoder_embed = state.get(f"{prefix}encoder.embed_tokens.weight", shared)
    if decoder_embed is None or encoder_embed is None:
        raise ExportError(f"{where}: the weights lack the token embeddings ({prefix}shared.weight)")
    decoder_embed = _take({"e": decoder_embed}, "e", where, (shape.decoder_vocab_size, d))
    encoder_embed = _take({"e": encoder_embed}, "e", where, (shape.vocab_size, d))
    if np.array_equal(encoder_embed, decoder_embed):
        encoder_embed = decoder_embed
    lm_head = state.get("lm_head.weight")
    tied = {**CONFIG_DEFAULTS, **config}["tie_word_embeddings"]
    lm_head = decoder_embed if lm_head is None or tied else _take(state, "lm_head.weight", where,
                                                                  (shape.decoder_vocab_size, d))
    if lm_head is not decoder_embed and np.array_equal(lm_head, decoder_embed):
        lm_head = decoder_embed
    bias = state.get("final_logits_bias")
    bias = np.zeros(shape.decoder_vocab_size, np.float32) if bias is None else _take(state, "final_logits_bias", where)
    positions = {}
    for side in ("encoder", "decoder"):
        stored = state.get(f"{prefix}{side}.embed_positions.weight")
        positions[side] = sinusoidal_positions(shape.max_positions, d) if stored is None \
            else _take(state, f"{prefix}{side}.embed_positions.weight", where, (shape.max_positions, d))
    weights = MarianWeights(shape=shape, encoder_embed=encoder_embed, decoder_embed=decoder_embed, lm_head=lm_head,
                            final_logits_bias=bias.reshape(-1), encoder_positions=positions["encoder"],
                            decoder_positions=positions["decoder"])

    def linear(base: str, out_dim: int, in_dim: int) -> tuple[np.ndarray, np.ndarray]:
        w = _take(state, f"{base}.weight", where, (out_dim, in_dim))
        return np.ascontiguousarray(w.T), _take(state, f"{base}.bias", where, (out_dim,))

    def attention(base: str, key: str) -> dict:
        params = {}
        for proj, short in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v"), ("out_proj", "o")):
            params[f"{key}{short}_w"], params[f"{key}{short}_b"] = linear(f"{base}.{proj}", d, d)
        return params

    def norm(base: str, key: str) -> dict:
        return {f"{key}_g": _take(state, f"{base}.weight", where, (d,)),
                f"{key}_b": _take(state, f"{base}.bias", where, (d,))}

    def ffn(base: str, dim: int) -> dict:
        fc1_w, fc1_b = linear(f"{base}.fc1", dim, d)
        fc2_w, fc2_b = linear(f"{base}.fc2", d, dim)
        return {"fc1_w": fc1_w, "fc1_b": fc1_b, "fc2_w": fc2_w, "fc2_b": fc2_b}

    for i in range(shape.encoder_layers):
        base = f"{prefix}encoder.layers.{i}"
        weights.encoder_layers.append({**attention(f"{base}.self_attn", "sa_"),
                                       **norm(f"{base}.self_attn_layer_norm", "ln1"),
                                       **ffn(base, shape.encoder_ffn), **norm(f"{base}.final_layer_norm", "ln2")})
    for i in range(shape.decoder_layers):
        base = f"{prefix}decoder.layers.{i}"
        weights.decoder_layers.append({**attention(f"{base}.self_attn", "sa_"),
                                       **norm(f"{base}.self_attn_layer_norm", "ln1"),
                                       **attention(f"{base}.encoder_attn", "ca_"),
                                       **norm(f"{base}.encoder_attn_layer_norm", "ln2"),
                                       **ffn(base, shape.decoder_ffn), **norm(f"{base}.final_layer_norm", "ln3")})
    return weights


def read_hf_dir(src: Path) -> MarianWeights:
    """Check a Hugging Face MarianMT folder and read its weights, without torch.

    Raises:
        ExportError: One line naming the missing, unreadable or inconsistent file.
    """
    from .marian import check_source_dir

    src = Path(src)
    check_source_dir(src)
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    return weights_from_state_dict(read_state_dict(src), config, str(src))
