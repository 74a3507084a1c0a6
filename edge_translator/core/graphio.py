"""The graph contract: names, axes and source alignment of a bundle's two ONNX graphs.

The exporter writes the graphs with these names and the runtime feeds and binds them by
these names, so both import this module and nobody else spells them.

- Encoder: ``input_ids`` and ``attention_mask`` [batch, source_length] int64 → the hidden
  states and every decoder layer's cross-attention keys and values (``cross_key.i``,
  ``cross_value.i``, float32 [batch, heads, source, head_dim]).
- Decoder: new ``input_ids`` [batch, new_length], the ``encoder_attention_mask``, each
  row's cached length (``past_lengths`` [batch] int32, ragged graphs only), the past K/V
  and the cross K/V → ``logits`` [batch, new_length, vocab] and the present K/V.

The batch-invariant schemes pad the cross K/V's source axis to a multiple of
:data:`SOURCE_ALIGN` and name that axis :data:`ALIGNED_SOURCE`; the other graphs name it
:data:`PLAIN_SOURCE`, and the runtime reads the alignment back from that name
(:func:`cross_alignment`). Pure data and functions: it imports nothing.
"""

from __future__ import annotations

# -- tensor names -------------------------------------------------------------------------
INPUT_IDS = "input_ids"
"""Encoder and decoder input: token ids, int64."""
ATTENTION_MASK = "attention_mask"
"""Encoder input: the source mask, int64 [batch, source_length] (1 = a token)."""
LAST_HIDDEN_STATE = "last_hidden_state"
"""Encoder output: the hidden states [batch, source_length, d_model]."""
ENCODER_ATTENTION_MASK = "encoder_attention_mask"
"""Decoder input: the source mask, as given to the encoder."""
PAST_LENGTHS = "past_lengths"
"""Decoder input of ragged graphs: each row's cached length, int32 [batch]."""
LOGITS = "logits"
"""Decoder output: float32 [batch, new_length, vocab]."""
CROSS_PREFIX = "cross_"
"""What the names of the cross-attention K/V begin with."""
HIDDEN = "hidden"
"""Decoder output of split bundles (those with a shortlist) and input of their output-layer
graphs: the final hidden state, float32 [batch, new_length, d_model]."""
OUTPUT_WEIGHT = "output_weight"
"""Shortlist graph input: the gathered rows of the output layer, int8 [d_model, columns]
(transposed) or float32 [columns, d_model]."""
OUTPUT_SCALE = "output_scale"
"""Shortlist graph input of int8 output layers: each gathered row's weight scale, float32 [columns]."""
OUTPUT_BIAS = "output_bias"
"""Shortlist graph input: each gathered row's bias, float32 [columns] (absent when the layer has none)."""
"""What the names of the cross-attention K/V begin with."""


def cross_key(layer: int) -> str:
    """The encoder's output (and the decoder's input) of one layer's cross-attention keys."""
    return f"cross_key.{layer}"


def cross_value(layer: int) -> str:
    """The cross-attention values of one layer, as :func:`cross_key`."""
    return f"cross_value.{layer}"


def past_key(layer: int) -> str:
    """The decoder's input of one layer's self-attention keys so far."""
    return f"past_key.{layer}"


def past_value(layer: int) -> str:
    """The decoder's input of one layer's self-attention values so far."""
    return f"past_value.{layer}"


def present_key(layer: int) -> str:
    """The decoder's output of one layer's self-attention keys, the new positions included."""
    return f"present_key.{layer}"


def present_value(layer: int) -> str:
    """The decoder's output of one layer's self-attention values, the new positions included."""
    return f"present_value.{layer}"


def cross_names(layers: int) -> list[str]:
    """Every layer's cross keys, then every layer's cross values."""
    return [cross_key(i) for i in range(layers)] + [cross_value(i) for i in range(layers)]


def past_names(layers: int) -> list[str]:
    """Every layer's past keys, then every layer's past values."""
    return [past_key(i) for i in range(layers)] + [past_value(i) for i in range(layers)]


def present_names(layers: int) -> list[str]:
    """Every layer's present keys, then every layer's present values."""
    return [present_key(i) for i in range(layers)] + [present_value(i) for i in range(layers)]


def encoder_io(layers: int) -> tuple[list[str], list[str]]:
    """Input and output names of the encoder graph."""
    outputs = [LAST_HIDDEN_STATE]
    for i in range(layers):
        outputs += [cross_key(i), cross_value(i)]
    return [INPUT_IDS, ATTENTION_MASK], outputs


def decoder_io(layers: int, ragged: bool = True, split: bool = False) -> tuple[list[str], list[str]]:
    """Input and output names of the decoder graph.

    Args:
        layers: Decoder layers.
        ragged: The graph takes :data:`PAST_LENGTHS` (``GroupQueryAttention`` over a cache
            each row fills to its own length); ``False``: the graphs of earlier bundles.
        split: The graph ends at :data:`HIDDEN` and the output layer is a graph of its own
            (bundles with a shortlist).
    """
    inputs = [INPUT_IDS, ENCODER_ATTENTION_MASK] + ([PAST_LENGTHS] if ragged else [])
    inputs += past_names(layers) + cross_names(layers)
    return inputs, [HIDDEN if split else LOGITS] + present_names(layers)


def is_split(decoder_outputs) -> bool:
    """Whether a decoder graph with these output names ends at the hidden state."""
    return HIDDEN in decoder_outputs


def projection_io() -> tuple[list[str], list[str]]:
    """Input and output names of the whole output layer's graph (split bundles)."""
    return [HIDDEN], [LOGITS]


def shortlist_io(scale: bool, bias: bool) -> tuple[list[str], list[str]]:
    """Input and output names of the shortlist graph: the hidden state and the gathered rows'
    weight, scale (int8 layers) and bias (when the layer has one)."""
    return [HIDDEN, OUTPUT_WEIGHT] + ([OUTPUT_SCALE] if scale else []) + ([OUTPUT_BIAS] if bias else []), [LOGITS]


def is_ragged(decoder_inputs) -> bool:
    """Whether a decoder graph with these input names takes each row's cached length."""
    return PAST_LENGTHS in decoder_inputs


# -- axes -----------------------------------------------------------------------------------
BATCH = "batch"
SOURCE_LENGTH = "source_length"
NEW_LENGTH = "new_length"
CACHE_CAPACITY = "cache_capacity"
"""The past K/V's length axis of ragged graphs: positions the cache holds."""
PAST_LENGTH = "past_length"
"""The past K/V's length axis of earlier graphs: the same for every row."""
PRESENT_LENGTH = "present_length"
SHORTLIST_COLUMNS = "shortlist_columns"
"""The columns a shortlist graph computes: the batch's candidate ids."""

# -- source alignment -------------------------------------------------------------------------
#: The batch-invariant graphs (int8r, q8, q4) pad the source axis of the cross-attention
#: K/V to a multiple of this; their encoder names that output axis :data:`ALIGNED_SOURCE`,
#: the others :data:`PLAIN_SOURCE`.
SOURCE_ALIGN = 16
ALIGNED_SOURCE, PLAIN_SOURCE = "aligned_source_length", SOURCE_LENGTH


def source_axis(aligned: bool) -> str:
    """The name of the cross K/V's source axis: :data:`ALIGNED_SOURCE` when padded."""
    return ALIGNED_SOURCE if aligned else PLAIN_SOURCE


def aligned(length, align: int = SOURCE_ALIGN):
    """``length`` (an int or an array of them) rounded up to a multiple of ``align``."""
    return -(-length // align) * align


def cross_alignment(encoder) -> int | None:
    """What the encoder rounds the cross K/V's source axis up to a multiple of (1: nothing),
    from the name of that axis in its outputs; ``None`` for a graph that names it neither way.

    Args:
        encoder: Anything with ONNX Runtime's ``get_outputs()`` (each with ``name`` and ``shape``).
    """
    names = {o.shape[2] if len(o.shape) == 4 else None for o in encoder.get_outputs()
             if o.name.startswith(CROSS_PREFIX)}
    return {ALIGNED_SOURCE: SOURCE_ALIGN, PLAIN_SOURCE: 1}.get(names.pop()) if len(names) == 1 else None
