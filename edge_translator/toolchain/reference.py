"""The Marian forward pass in numpy: the reference the exported graphs are proved against.

It computes what transformers' ``MarianMTModel`` computes in eval mode, in the dtype of
your choice: float64 is the exact answer, float32 shows how much rounding this model
amplifies. Post-norm layers; token embeddings times ``embed_scale`` plus the stored
sinusoidal positions; queries scaled by ``head_dim ** -0.5``; padded keys and future
positions masked with the dtype's most negative number, as transformers does; logits
``h @ lm_head.T + final_logits_bias``. The weights stay float32 and each is widened at
the moment it is used, so a float64 pass costs one matrix at a time, not a second model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .marian import MarianWeights

#: Rows of the output projection widened at a time in :meth:`MarianReference.logits`.
_LOGIT_CHUNK = 8192


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to the dtype's precision (numpy has none; math.erf is correctly rounded in float64)."""
    return np.frompyfunc(math.erf, 1, 1)(x).astype(x.dtype)


def _activation(name: str, x: np.ndarray) -> np.ndarray:
    """transformers' ACT2FN for the activations Marian configs use."""
    if name in ("swish", "silu"):
        return x / (1 + np.exp(-x))
    if name == "relu":
        return np.maximum(x, 0)
    if name == "gelu":
        return 0.5 * x * (1 + _erf(x / np.sqrt(x.dtype.type(2))))
    if name == "gelu_new":
        c = x.dtype.type(math.sqrt(2 / math.pi))
        return 0.5 * x * (1 + np.tanh(c * (x + x.dtype.type(0.044715) * x ** 3)))
    raise ValueError(f"activation {name!r} has no reference implementation")


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@dataclass
class DecoderCache:
    """Per decoder layer: self-attention keys and values so far [B, H, T, dh], and the
    cross-attention keys and values of the encoder output [B, H, S, dh]."""

    self_k: list[np.ndarray]
    self_v: list[np.ndarray]
    cross_k: list[np.ndarray]
    cross_v: list[np.ndarray]

    @property
    def length(self) -> int:
        """Decoder positions already in the cache."""
        return self.self_k[0].shape[2] if self.self_k else 0


class MarianReference:
    """One Marian model's forward pass in one dtype.

    Args:
        weights: The model, as read for export.
        dtype: ``np.float64`` for the exact reference, ``np.float32`` for float32's own error.
    """

    def __init__(self, weights: MarianWeights, dtype=np.float64):
        self.weights = weights
        self.shape = weights.shape
        self.dtype = np.dtype(dtype)

    def _w(self, array: np.ndarray) -> np.ndarray:
        return array.astype(self.dtype, copy=False)

    def _linear(self, x: np.ndarray, layer: dict, name: str) -> np.ndarray:
        return x @ self._w(layer[f"{name}_w"]) + self._w(layer[f"{name}_b"])

    def _norm(self, x: np.ndarray, layer: dict, name: str) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        eps = self.dtype.type(self.shape.layer_norm_eps)
        return (x - mean) / np.sqrt(var + eps) * self._w(layer[f"{name}_g"]) + self._w(layer[f"{name}_b"])

    def _heads(self, x: np.ndarray, heads: int) -> np.ndarray:
        b, t, d = x.shape
        return x.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)

    def _attend(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray, layer: dict,
                prefix: str) -> np.ndarray:
        """Scaled dot-product attention of split heads, then the output projection."""
        scores = q @ k.transpose(0, 1, 3, 2) + bias
        context = _softmax(scores) @ v
        b, h, t, dh = context.shape
        return self._linear(context.transpose(0, 2, 1, 3).reshape(b, t, h * dh), layer, f"{prefix}o")

    def _query(self, x: np.ndarray, layer: dict, prefix: str, heads: int) -> np.ndarray:
        scaling = self.dtype.type((self.shape.d_model // heads) ** -0.5)
        return self._heads(self._linear(x, layer, f"{prefix}q") * scaling, heads)

    def _key_mask(self, mask: np.ndarray) -> np.ndarray:
        """[B, 1, 1, S]: 0 where the source has a token, the dtype's minimum where it is padding."""
        lowest = np.finfo(self.dtype).min
        return np.where(mask.astype(bool), self.dtype.type(0), lowest)[:, None, None, :].astype(self.dtype)

    def _embed(self, table: np.ndarray, positions: np.ndarray, ids: np.ndarray, start: int) -> np.ndarray:
        scale = self.dtype.type(self.shape.embed_scale)
        tokens = self._w(table[ids]) * scale
        return tokens + self._w(positions[start: start + ids.shape[1]])[None]

    def encode(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """The encoder's last hidden state [B, S, d_model]."""
        shape, heads = self.shape, self.shape.encoder_heads
        h = self._embed(self.weights.encoder_embed, self.weights.encoder_positions, input_ids, 0)
        bias = self._key_mask(attention_mask)
        for layer in self.weights.encoder_layers:
            q = self._query(h, layer, "sa_", heads)
            k = self._heads(self._linear(h, layer, "sa_k"), heads)
            v = self._heads(self._linear(h, layer, "sa_v"), heads)
            h = self._norm(h + self._attend(q, k, v, bias, layer, "sa_"), layer, "ln1")
            inner = _activation(shape.activation, self._linear(h, layer, "fc1"))
            h = self._norm(h + self._linear(inner, layer, "fc2"), layer, "ln2")
        return h

    def start_cache(self, encoder_hidden: np.ndarray) -> DecoderCache:
        """An empty self-attention cache and the cross-attention keys and values."""
        heads, b = self.shape.decoder_heads, encoder_hidden.shape[0]
        empty = np.zeros((b, heads, 0, self.shape.d_model // heads), self.dtype)
        layers = self.weights.decoder_layers
        return DecoderCache(
            self_k=[empty] * len(layers), self_v=[empty] * len(layers),
            cross_k=[self._heads(self._linear(encoder_hidden, layer, "ca_k"), heads) for layer in layers],
            cross_v=[self._heads(self._linear(encoder_hidden, layer, "ca_v"), heads) for layer in layers],
        )

    def decode(self, decoder_ids: np.ndarray, attention_mask: np.ndarray, cache: DecoderCache) -> np.ndarray:
        """Run decoder tokens [B, T] after those in ``cache`` (extended in place).

        Returns:
            The last layer's hidden states [B, T, d_model].
        """
        shape, heads = self.shape, self.shape.decoder_heads
        past, t = cache.length, decoder_ids.shape[1]
        h = self._embed(self.weights.decoder_embed, self.weights.decoder_positions, decoder_ids, past)
        future = np.triu(np.ones((t, past + t), bool), k=past + 1)  # row i sees keys 0..past+i
        causal = np.where(future, np.finfo(self.dtype).min, self.dtype.type(0)).astype(self.dtype)[None, None]
        cross_bias = self._key_mask(attention_mask)
        for i, layer in enumerate(self.weights.decoder_layers):
            q = self._query(h, layer, "sa_", heads)
            cache.self_k[i] = np.concatenate([cache.self_k[i], self._heads(self._linear(h, layer, "sa_k"), heads)], 2)
            cache.self_v[i] = np.concatenate([cache.self_v[i], self._heads(self._linear(h, layer, "sa_v"), heads)], 2)
            h = self._norm(h + self._attend(q, cache.self_k[i], cache.self_v[i], causal, layer, "sa_"), layer, "ln1")
            q = self._query(h, layer, "ca_", heads)
            h = self._norm(h + self._attend(q, cache.cross_k[i], cache.cross_v[i], cross_bias, layer, "ca_"),
                           layer, "ln2")
            inner = _activation(shape.activation, self._linear(h, layer, "fc1"))
            h = self._norm(h + self._linear(inner, layer, "fc2"), layer, "ln3")
        return h

    def logits(self, hidden: np.ndarray) -> np.ndarray:
        """``hidden @ lm_head.T + final_logits_bias`` [..., vocab], widening the projection in chunks."""
        head, bias = self.weights.lm_head, self.weights.final_logits_bias
        out = np.empty(hidden.shape[:-1] + (head.shape[0],), self.dtype)
        for lo in range(0, head.shape[0], _LOGIT_CHUNK):
            hi = min(lo + _LOGIT_CHUNK, head.shape[0])
            out[..., lo:hi] = hidden @ self._w(head[lo:hi]).T + self._w(bias[lo:hi])
        return out

    def forward(self, input_ids: np.ndarray, attention_mask: np.ndarray,
                decoder_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logits [B, T, vocab] for all decoder tokens at once, and the encoder output."""
        hidden = self.encode(input_ids, attention_mask)
        return self.logits(self.decode(decoder_ids, attention_mask, self.start_cache(hidden))), hidden

    def greedy(self, input_ids: np.ndarray, attention_mask: np.ndarray, new_tokens: int,
               banned: tuple[int, ...]) -> np.ndarray:
        """Greedy decoding through the cache with ``banned`` ids never chosen, as transformers'
        ``generate(min_new_tokens=new_tokens, bad_words_ids=[[pad]])`` does before its last step.

        Returns:
            [B, new_tokens] ids: the decoder start id, then ``new_tokens - 1`` chosen tokens.
        """
        b = input_ids.shape[0]
        ids = np.full((b, new_tokens), self.shape.decoder_start_id, np.int64)
        cache = self.start_cache(self.encode(input_ids, attention_mask))
        for t in range(1, new_tokens):
            step = self.logits(self.decode(ids[:, t - 1: t], attention_mask, cache))[:, -1]
            step[:, list(banned)] = -np.inf
            ids[:, t] = step.argmax(axis=-1)
        return ids
