"""Block-quantized bundles (q8, q4): the codes, the graphs, batch invariance, the checks, the CPU warning."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.core.cpu import CpuInfo, check_runtime, cpu_info, parse_cpuinfo, slow_path_warning
from edge_translator.core.decode import Seq2Seq
from edge_translator.core.errors import BundleError
from edge_translator.core.tokenizer import Tokenizer
from edge_translator.toolchain.quantize import (
    BLOCK_SIZES,
    QuantizeOptions,
    check_int8,
    quantize_blocks,
    unquantized_weights,
)
from edge_translator.toolchain.testmodels import english_sentences

from .conftest import FIXTURES, run_cli
from .ties import assert_equal_or_tie, greedy_tie, onnx_next_logprobs

torch = pytest.importorskip("torch")  # the export extra; CI installs it

SCHEMES = [("q8", 16), ("q8", 64), ("q4", 16), ("q4", 64)]


# -- the codes ----------------------------------------------------------------------------
@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("block", [16, 64, 128])
@pytest.mark.parametrize("k", [32, 100, 256])
def test_block_codes_round_trip(bits, block, k):
    rng = np.random.default_rng(bits * 1000 + block + k)
    weight = (rng.standard_normal((24, k)) * rng.uniform(0.01, 2.0, size=(24, 1))).astype(np.float32)
    weight[3] = 0.0  # an all-zero row must not divide by zero
    weight[5, :] = np.abs(weight[5, :])  # one-signed rows use the full code range
    q = quantize_blocks(weight, bits, block)
    blocks = -(-k // block)
    assert q.packed.dtype == np.uint8 and q.packed.shape == (24, blocks, block * bits // 8)
    assert q.scales.dtype == np.float32 and q.scales.shape == (24, blocks)
    restored = q.dequantize()
    assert restored.shape == weight.shape
    assert np.all(restored[3] == 0)
    # every weight lies within half a step of its code, or is clipped by at most a quarter of the block's range
    step = np.repeat(q.scales, block, axis=1)[:, :k]
    error = np.abs(restored - weight)
    assert np.all(error <= np.maximum(step / 2 * 1.0001, np.repeat(np.abs(weight).reshape(24, -1).max(1,
                  keepdims=True), k, axis=1) * (0.0 if bits == 8 else 0.26)))
    if bits == 8:
        assert np.all(error <= step / 2 * 1.0001)
    codes = np.stack([q.packed & 15, q.packed >> 4], -1).reshape(24, blocks, block) if bits == 4 else q.packed
    assert codes.max() <= 2 ** bits - 1
    # padding to whole blocks is zero, i.e. the zero-point code
    assert np.all(codes.reshape(24, -1)[:, k:] == 2 ** (bits - 1))


def test_four_bit_codes_are_packed_low_nibble_first():
    weight = np.array([[-8.0, 7.0, 0.0, 1.0] * 4], dtype=np.float32)
    q = quantize_blocks(weight, 4, 16)
    assert q.scales[0, 0] == 1.0
    # codes are value + 8: 0, 15, 8, 9 -> bytes (15 << 4) | 0 and (9 << 4) | 8
    assert q.packed[0, 0, :2].tolist() == [0xF0, 0x98]


def test_block_size_is_validated():
    assert QuantizeOptions(mode="q8", block_size=128).bits == 8
    for bad in (0, 48, 512):
        with pytest.raises(ValueError, match="block size"):
            QuantizeOptions(mode="q4", block_size=bad)
    assert set(BLOCK_SIZES) >= {64, 128, 256}


# -- the graphs against numpy -----------------------------------------------------------------
def _run_builder(build, feeds: dict, outputs: list[tuple[str, int, list]]):
    """Build a one-off graph with GraphBuilder and run it on ONNX Runtime."""
    import onnxruntime as ort
    from onnx import helper

    from edge_translator.toolchain.onnxbuild import GraphBuilder

    g = GraphBuilder("probe", QuantizeOptions(mode="none"))
    names = build(g)
    g.inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
                for k, v in feeds.items()]
    for name, (out, elem, dims) in zip(names, outputs):
        g.rename(name, out)
        g.outputs.append(helper.make_tensor_value_info(out, elem, dims))
    from onnx import numpy_helper

    graph = helper.make_graph(g.nodes, "probe", g.inputs, g.outputs,
                              [numpy_helper.from_array(v, k) for k, v in g.inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.mark.parametrize("bits,block", [(8, 16), (8, 64), (4, 32), (4, 128)])
def test_graph_ops_match_the_dequantized_matrix(bits, block):
    """MatMulNBits computes with the codes' matrix; GatherBlockQuantized returns its rows exactly."""
    from onnx import TensorProto

    rng = np.random.default_rng(bits + block)
    vocab, d = 300, 96  # 96 is not a multiple of 64 or 128: the padded path
    table = (rng.standard_normal((vocab, d)) * 0.1).astype(np.float32)
    x = rng.standard_normal((5, d)).astype(np.float32)
    ids = np.array([[0, 7, vocab - 1]], dtype=np.int64)
    quant = QuantizeOptions(mode=f"q{bits}", block_size=block)

    def build(g):
        g.quant = quant
        blocks, scales = g.block_table(table)
        packed = g.const("w", blocks.packed)
        return [g.nbits_matmul("x", packed, scales, blocks, None, "mm"), g.block_gather("ids", table, "emb")]

    logits, rows = _run_builder(build, {"x": x, "ids": ids},
                                [("logits", TensorProto.FLOAT, [5, vocab]), ("rows", TensorProto.FLOAT, [1, 3, d])])
    reference = quantize_blocks(table, bits, block).dequantize()
    assert np.array_equal(rows[0], reference[ids[0]])
    expected = x @ reference.T
    # int8 activations per block: about 1% of the largest logit
    assert np.abs(logits - expected).max() <= 0.02 * np.abs(expected).max()


# -- bundles of the tiny model -------------------------------------------------------------
@pytest.fixture(scope="module")
def block_bundles(tmp_path_factory, tiny_hf):
    """The tiny model exported as q8 and q4 at two block sizes, through the CLI."""
    root = tmp_path_factory.mktemp("blockquant")
    made = {}
    for mode, block in SCHEMES:
        out = root / f"{mode}-{block}"
        result = run_cli("export", str(tiny_hf), str(out), "--quantize", mode, "--block-size", str(block))
        assert result.returncode == 0, result.stderr.decode()
        made[(mode, block)] = (out, result.stdout.decode())
    return made


def _parts(path):
    bundle = load_bundle(path)
    tokenizer = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                               bundle.pad_id)
    return bundle, tokenizer, Seq2Seq.load(bundle, threads=1)


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: f"{s[0]}-{s[1]}")
def test_scheme_exports_and_translates(block_bundles, scheme):
    out, stdout = block_bundles[scheme]
    mode, block = scheme
    m = load_bundle(out).manifest
    assert m["quantization"]["mode"] == mode and m["quantization"]["block_size"] == block
    assert m["quantization"]["weight_bits"] == int(mode[1])
    assert m["runtime"]["onnxruntime"]["x86_64"] and m["runtime"]["int8_kernel_cpu_flags"]["aarch64"] == ["asimddp"]
    assert m["validation"]["int8_check"]["passed"] and m["validation"]["batch_invariance"]["sentences"] >= 10
    assert f"{mode} vs FP32 greedy" in stdout and f"{mode} batched vs one at a time" in stdout
    # every linear layer and the output layer are MatMulNBits; the lookups are GatherBlockQuantized
    ops = {}
    for name in ("encoder", "decoder"):
        graph = onnx.load(str(out / f"{name}.onnx"), load_external_data=False).graph
        ops[name] = [n.op_type for n in graph.node]
        weights = {t.name for t in graph.initializer}
        assert "DynamicQuantizeMatMul" not in ops[name] and "Gemm" not in ops[name]
        # plain MatMuls remain only between activations (cross-attention scores and weighted values)
        assert not [n.name for n in graph.node if n.op_type == "MatMul" and set(n.input) & weights]
        assert ops[name].count("GatherBlockQuantized") == 1
    config = m["model"]["architecture"]
    # encoder: qkv, out, fc1, fc2 per layer, and one cross K/V projection per decoder layer
    assert ops["encoder"].count("MatMulNBits") == 4 * config["encoder_layers"] + config["decoder_layers"]
    # decoder: qkv, out, cross q, cross out, fc1, fc2 per layer, and the output layer
    assert ops["decoder"].count("MatMulNBits") == 6 * config["decoder_layers"] + 1
    check_int8({"encoder": out / "encoder.onnx", "decoder": out / "decoder.onnx"},
               QuantizeOptions(mode=mode, block_size=block))
    result = run_cli("translate", "--model", str(out), stdin="The weather is nice today. I will go out.".encode())
    assert result.returncode == 0 and result.stdout.decode().strip(), result.stderr.decode()
    assert b"Traceback" not in result.stderr


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: f"{s[0]}-{s[1]}")
def test_embedding_and_output_layer_share_their_bytes(block_bundles, scheme):
    out, _ = block_bundles[scheme]
    regions: dict = {}
    for name in ("encoder", "decoder"):
        model = onnx.load(str(out / f"{name}.onnx"), load_external_data=False)
        for t in model.graph.initializer:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                info = {e.key: e.value for e in t.external_data}
                regions.setdefault((int(info["offset"]), int(info["length"])), set()).add(t.name)
    bits = scheme[0][1]
    table = next(names for names in regions.values() if f"embed_tokens.rows_q{bits}" in names)
    # one region: the lookup's rows (both graphs) and the output layer's blocks (decoder)
    assert table == {f"embed_tokens.rows_q{bits}", f"embed_tokens.weight_q{bits}"}
    spans = sorted(regions)
    assert all(a[0] + a[1] <= b[0] for a, b in zip(spans, spans[1:])), "regions overlap"
    assert (out / "weights.bin").stat().st_size <= sum(length for _, length in regions) + 4096 * len(regions)


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: f"{s[0]}-{s[1]}")
def test_output_does_not_depend_on_batch_mates(block_bundles, scheme, tie_counter):
    """A sentence decodes to the same ids alone and in batches of any company (near-ties aside)."""
    check_batch_mates(block_bundles[scheme][0], tie_counter, seed=11)


def check_batch_mates(path, tie_counter, seed: int) -> None:
    """24 sentences decode to the same ids alone and in two batch orders, near-ties aside."""
    bundle, tokenizer, model = _parts(path)
    target = bundle.targets[bundle.default_target].id
    sources = [tokenizer.encode(s, target) for s in english_sentences(24, seed=seed)]
    scorer = onnx_next_logprobs(model)
    alone = [model.greedy_all([s], 24)[0] for s in sources]
    batched = model.greedy_all(sources, 24) + model.greedy_all(sources[::-1], 24)[::-1]
    for k, hyp in enumerate(batched):
        src, ref = sources[k % len(sources)], alone[k % len(sources)]
        assert_equal_or_tie(tie_counter, src, hyp.ids, ref.ids, lambda: greedy_tie(
            src, hyp.ids, ref.ids, bundle.eos_id, scorer, hyp.stop == "eos", ref.stop == "eos"))
    assert tie_counter.equal >= 0.95 * tie_counter.compared


def _logit_spread(path) -> float:
    """Largest first-step logit difference of a sentence alone and in a padded batch."""
    from edge_translator.toolchain.validate import _first_logits

    bundle, tokenizer, model = _parts(path)
    target = bundle.targets[bundle.default_target].id
    sources = [tokenizer.encode(s, target) for s in english_sentences(16, seed=5)]
    together = _first_logits(model, *model.pad(sources))
    alone = np.concatenate([_first_logits(model, *model.pad([s])) for s in sources])
    return float(np.abs(together - alone).max())


def test_block_schemes_are_batch_invariant_where_int8_is_not(block_bundles, tiny_int8):
    """Per-call activation scales (int8) move logits by batch company; per-row ones (q8, q4) do not."""
    assert _logit_spread(tiny_int8) > 1e-3
    for scheme in SCHEMES:
        assert _logit_spread(block_bundles[scheme][0]) <= 1e-4, scheme


# -- the quantization check ---------------------------------------------------------------------
def test_check_refuses_a_stray_float_matrix(tmp_path, tiny_hf, block_bundles):
    """A q8 graph with one linear layer left in float32 is refused, naming the layer."""
    from edge_translator.toolchain.graphs import write_graphs
    from edge_translator.toolchain.marian import extract_weights, load_model

    model, _ = load_model(tiny_hf)
    weights = extract_weights(model, str(tiny_hf))
    written = write_graphs(weights, QuantizeOptions(mode="q8", exclude_nodes=("decoder.layers.1.fc2",)), tmp_path)
    problems = unquantized_weights(written.files, QuantizeOptions(mode="q8"))
    assert len(problems) == 1 and "decoder.layers.1.fc2" in problems[0] and "float32" in problems[0]
    with pytest.raises(Exception, match="did not apply"):
        check_int8(written.files, QuantizeOptions(mode="q8"))
    # the same graphs pass when that layer is excluded on purpose
    check_int8(written.files, QuantizeOptions(mode="q8", exclude_nodes=("decoder.layers.1.fc2",)))
    # a bundle of another scheme is refused too: q8 blocks of 64 are not q4, nor q8 blocks of 16
    out = block_bundles[("q8", 64)][0]
    files = {"encoder": out / "encoder.onnx", "decoder": out / "decoder.onnx"}
    assert unquantized_weights(files, QuantizeOptions(mode="q4", block_size=64))
    assert unquantized_weights(files, QuantizeOptions(mode="q8", block_size=16))


@pytest.mark.parametrize("args,message", [
    (["--quantize", "q8", "--block-size", "48"], "block size must be one of"),
    (["--quantize", "q4", "--restrict-output"], "--restrict-output works with"),
    (["--quantize", "q8", "--calibrate", "README.md"], "--calibrate makes a static INT8 bundle"),
])
def test_bad_scheme_options_are_one_line(tmp_path, tiny_hf, args, message):
    out = tmp_path / "out"
    result = run_cli("export", str(tiny_hf), str(out), *args)
    err = result.stderr.decode()
    assert result.returncode != 0 and message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


# -- the CPU ---------------------------------------------------------------------------------------
PI4 = """processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm crc32 cpuid
CPU implementer\t: 0x41
CPU part\t: 0xd08

Model\t\t: Raspberry Pi 4 Model B Rev 1.4
"""
PI5 = PI4.replace("crc32 cpuid", "crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp").replace(
    "0xd08", "0xd0b").replace("Pi 4 Model B Rev 1.4", "Pi 5 Model B Rev 1.0")
OLD_X86 = "processor\t: 0\nmodel name\t: Intel(R) Core(TM)2 Duo CPU\nflags\t\t: fpu sse sse2 ssse3 sse4_1\n"
NEW_X86 = "processor\t: 0\nmodel name\t: AMD Ryzen 7 7840U\nflags\t\t: fpu sse2 avx avx2 avx512f avx512_vnni\n"


@pytest.mark.parametrize("text,arch,kernel", [
    (PI4, "aarch64", False), (PI5, "aarch64", True), (OLD_X86, "x86_64", False), (NEW_X86, "x86_64", True),
    ("", "riscv64", None), ("processor\t: 0\n", "x86_64", None),
])
def test_int8_kernel_from_cpu_flags(text, arch, kernel):
    cpu = parse_cpuinfo(text, arch)
    assert cpu.int8_kernel() is kernel
    for mode in ("q8", "q4"):
        warning = slow_path_warning({"mode": mode}, cpu)
        assert (warning is not None) is (kernel is False)
        if warning:
            assert "--quantize int8" in warning and mode in warning and "\n" not in warning
    assert slow_path_warning({"mode": "dynamic"}, cpu) is None


def test_another_architectures_flags_say_nothing(tmp_path):
    """Under qemu user emulation an aarch64 process reads the x86 host's /proc/cpuinfo."""
    cpu = parse_cpuinfo(NEW_X86, "aarch64")
    assert cpu.flags is None and cpu.int8_kernel() is None and "Ryzen" not in cpu.name
    assert slow_path_warning({"mode": "q8"}, cpu) is None  # unknown: no false warning
    assert parse_cpuinfo(PI5, "x86_64").flags is None


def test_aarch64_features_from_the_kernels_hwcap_word(tmp_path):
    import struct

    from edge_translator.core.cpu import aarch64_hwcap_flags

    auxv = tmp_path / "auxv"
    auxv.write_bytes(struct.pack("<6Q", 6, 4096, 16, (1 << 1) | (1 << 20), 0, 0))  # AT_PAGESZ, AT_HWCAP, AT_NULL
    assert aarch64_hwcap_flags(auxv) == {"asimd", "asimddp"}
    auxv.write_bytes(struct.pack("<4Q", 16, 1 << 1, 0, 0))  # a Pi 4: no dot product
    assert aarch64_hwcap_flags(auxv) == {"asimd"}
    assert aarch64_hwcap_flags(tmp_path / "missing") is None


def test_cpu_names_and_arch_aliases(tmp_path):
    fake = tmp_path / "cpuinfo"
    fake.write_text(PI4)
    cpu = cpu_info(fake, machine="ARM64")
    assert cpu.arch == "aarch64" and cpu.name == "Raspberry Pi 4 Model B Rev 1.4" and cpu.int8_kernel() is False
    assert cpu_info(tmp_path / "missing", machine="AMD64").arch == "x86_64"


def test_loading_warns_on_the_slow_path_and_refuses_an_old_runtime(block_bundles, monkeypatch, caplog):
    out = block_bundles[("q8", 64)][0]
    bundle = load_bundle(out)
    monkeypatch.setattr("edge_translator.core.cpu.cpu_info", lambda *a, **k: parse_cpuinfo(PI4, "aarch64"))
    with caplog.at_level(logging.WARNING, logger="edge_translator"):
        Seq2Seq.load(bundle, threads=1)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "Raspberry Pi 4" in warnings[0] and "--quantize int8" in warnings[0]
    caplog.clear()
    monkeypatch.setattr("edge_translator.core.cpu.cpu_info", lambda *a, **k: parse_cpuinfo(PI5, "aarch64"))
    with caplog.at_level(logging.WARNING, logger="edge_translator"):
        Seq2Seq.load(bundle, threads=1)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    with pytest.raises(BundleError, match=r"needs onnxruntime >= 1\.23 on aarch64.*pip install"):
        check_runtime(bundle.manifest, parse_cpuinfo(PI5, "aarch64"), onnxruntime_version="1.22.1")
    assert check_runtime(bundle.manifest, parse_cpuinfo(PI5, "aarch64"), onnxruntime_version="1.23.0") is None
    # int8 bundles run anywhere: nothing to check
    assert check_runtime(load_bundle(FIXTURES / "tiny-int8").manifest, CpuInfo("aarch64", "Pi", frozenset()),
                         onnxruntime_version="1.17.0") is None


def test_cli_shows_the_slow_path_warning_in_one_line(block_bundles, tmp_path):
    """A user on a CPU without int8 dot products sees one warning line, and still gets the translation."""
    out = block_bundles[("q4", 16)][0]
    fake = tmp_path / "cpuinfo"
    fake.write_text(OLD_X86)
    result = run_cli("translate", "--model", str(out), stdin=b"Hello there.",
                     env={"EDGE_TRANSLATOR_CPUINFO": str(fake)})
    err = result.stderr.decode().strip().splitlines()
    assert result.returncode == 0 and result.stdout.decode().strip()
    assert len(err) == 1 and "Core(TM)2 Duo" in err[0] and "--quantize int8" in err[0], err


def test_invariant_attention_computes_the_same_function(tmp_path, tiny_hf, fp32_parts, tie_counter):
    """Cross-attention over a source padded to whole loop steps equals the unpadded one in float32."""
    import json
    import shutil

    from edge_translator.toolchain.graphs import write_graphs
    from edge_translator.toolchain.marian import extract_weights, load_model

    fp32_bundle, tokenizer, fp32 = fp32_parts
    model, _ = load_model(tiny_hf)
    # bits set (q8) but no op type quantized: the batch-invariant graph layout with float32 weights
    written = write_graphs(extract_weights(model, str(tiny_hf)), QuantizeOptions(mode="q8", op_types=()), tmp_path)
    assert not written.quantized_nodes
    for name in ("source.spm", "target.spm", "vocab.json"):
        shutil.copy(fp32_bundle.file(name), tmp_path / name)
    manifest = dict(fp32_bundle.manifest)
    from edge_translator.core.bundle import file_record

    manifest["files"] = {p.name: file_record(p) for p in tmp_path.iterdir() if p.name != "bundle.json"}
    (tmp_path / "bundle.json").write_text(json.dumps(manifest))
    plain = Seq2Seq.load(load_bundle(tmp_path), threads=1)
    target = fp32_bundle.targets[fp32_bundle.default_target].id
    sources = [tokenizer.encode(s, target) for s in english_sentences(12, seed=3)]
    ids, mask = fp32.pad(sources)
    cross_k, _ = plain.encode(ids, mask)
    assert cross_k[0].shape[2] % 16 == 0 and cross_k[0].shape[2] >= ids.shape[1]  # source axis aligned
    from edge_translator.toolchain.validate import _first_logits

    assert np.abs(_first_logits(plain, ids, mask) - _first_logits(fp32, ids, mask)).max() < 1e-5
    scorer = onnx_next_logprobs(fp32)
    for src, a, b in zip(sources, plain.greedy_all(sources, 16), fp32.greedy_all(sources, 16)):
        assert_equal_or_tie(tie_counter, src, a.ids, b.ids, lambda: greedy_tie(
            src, a.ids, b.ids, fp32_bundle.eos_id, scorer, a.stop == "eos", b.stop == "eos"))


def test_engine_serves_a_sentence_the_same_whoever_else_is_served(block_bundles, tie_counter):
    """Through the shared engine, a q8 bundle gives each probe sentence the output it gets alone,
    while other callers' sentences of other lengths fill the batches."""
    import threading

    from edge_translator.core.translator import Translator

    bundle, tokenizer, model = _parts(block_bundles[("q8", 64)][0])
    probes = english_sentences(6, seed=21)
    with Translator.load(bundle.path, threads=1, cache=None) as translator:
        alone = {p: translator.translate_iter(p).__next__() for p in probes}
        for round_ in range(3):
            got: dict = {}
            companions = [" ".join(english_sentences(4, seed=300 + 10 * round_ + k)) for k in range(8)]

            def call(text, key=None):
                results = list(translator.translate_iter(text))
                if key is not None:
                    got[key] = results[0]

            threads = [threading.Thread(target=call, args=(c,)) for c in companions]
            threads += [threading.Thread(target=call, args=(p, p)) for p in probes]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            scorer = onnx_next_logprobs(model)
            target = bundle.targets[bundle.default_target].id
            for p in probes:
                mine, ref = got[p], alone[p]
                src = tokenizer.encode(mine.source, target)
                assert_equal_or_tie(tie_counter, src, mine.ids, ref.ids, lambda: greedy_tie(
                    src, mine.ids, ref.ids, bundle.eos_id, scorer, mine.stop == "eos", ref.stop == "eos"))
    assert tie_counter.equal >= 0.95 * tie_counter.compared
