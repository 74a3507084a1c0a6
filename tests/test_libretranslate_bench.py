"""bench-serve --libretranslate: settings, environment, the argos package, the launcher's patches, the report.

The launcher is tested on fake argos and LibreTranslate modules in a subprocess (no
network, no install); one ``perf`` test installs LibreTranslate from PyPI (cached under
``.cache/``) and runs the whole side-by-side harness on the tiny fixtures.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from edge_translator.bench import argospackage, ltlauncher
from edge_translator.bench import libretranslate as peer
from edge_translator.bench.report import render_libretranslate
from edge_translator.bench.servebench import agreement
from edge_translator.core.bundle import load_bundle

ROOT = Path(__file__).resolve().parent.parent


# -- settings and environment -------------------------------------------------------------
def test_grid_parses_and_explains_bad_entries():
    assert [s.name for s in peer.parse_grid("1x2, 2x1,1x2")] == ["1x2", "2x1"]
    assert peer.parse_grid("2X1")[0].environment() == {"ARGOS_INTER_THREADS": "2", "ARGOS_INTRA_THREADS": "1"}
    for bad, message in (("2", "INTERxINTRA"), ("0x1", "at least one"), ("", "empty"), ("ax1", "INTERxINTRA")):
        with pytest.raises(ValueError, match=message):
            peer.parse_grid(bad)


def test_default_grid_fits_the_cpus_and_defaults_come_first():
    assert [s.name for s in peer.default_grid(2)] == ["1x1", "1x2", "2x1"]
    assert [s.name for s in peer.default_grid(1)] == ["1x1"]
    options = peer.LibreTranslateOptions(grid=peer.parse_grid("2x1"))
    assert [s.name for s in options.settings] == ["defaults", "2x1"]
    assert peer.Setting().environment() == {}
    with pytest.raises(ValueError, match="length"):
        peer.LibreTranslateOptions(length="longer")


def test_environment_is_private_greedy_and_ignores_the_callers_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGOS_BEAM_SIZE", "4")
    monkeypatch.setenv("ARGOS_INTER_THREADS", "8")
    monkeypatch.setenv("XDG_DATA_HOME", "/somewhere/else")
    monkeypatch.setenv("LT_THREADS", "64")
    options = peer.LibreTranslateOptions(work=tmp_path)
    env = peer.environment(options, peer.Setting())
    assert env["ARGOS_BEAM_SIZE"] == "1"
    assert "ARGOS_INTER_THREADS" not in env and "LT_THREADS" not in env
    for key in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "ARGOS_PACKAGES_DIR"):
        assert Path(env[key]).is_relative_to(tmp_path.resolve()), key
    assert env["ARGOS_PACKAGES_DIR"] == str(options.packages.resolve())
    tuned = peer.environment(options, peer.Setting(2, 1))
    assert (tuned["ARGOS_INTER_THREADS"], tuned["ARGOS_INTRA_THREADS"]) == ("2", "1")


def test_a_missing_venv_has_no_version(tmp_path):
    assert peer.installed_version(tmp_path / "nothing") is None


# -- the argos package ------------------------------------------------------------------------
def test_metadata_names_languages_and_the_opus_mt_tokens(tiny_int8):
    bundle = load_bundle(tiny_int8)
    meta = argospackage.package_metadata(bundle, "int8")
    assert (meta["from_code"], meta["to_code"], meta["type"]) == ("en", "zh", "translate")
    assert meta["opus_mt"] == {"source_prefix": [">>cmn_Hans<<"], "source_suffix": ["</s>"],
                               "source_spm": "sentencepiece.model", "target_spm": "target.spm"}
    assert argospackage.package_name(bundle) == f"translate-en_zh-{bundle.name}"


def test_package_layout_and_its_greedy_output_equal_the_bundle(tmp_path, tiny_fp32, tiny_hf):
    ctranslate2 = pytest.importorskip("ctranslate2")
    import sentencepiece

    from edge_translator.core.decode import Seq2Seq
    from edge_translator.core.tokenizer import Tokenizer
    from edge_translator.toolchain.testmodels import english_sentences

    bundle = load_bundle(tiny_fp32)
    out = argospackage.ensure_package(bundle, tmp_path / "packages", tmp_path / "checkpoints", hf_dir=tiny_hf)
    assert (out / "model" / "model.bin").is_file() and (out / "metadata.json").is_file()
    assert (out / "sentencepiece.model").read_bytes() == bundle.source_spm.read_bytes()
    assert (out / "target.spm").read_bytes() == bundle.target_spm.read_bytes()
    stamp = (out / argospackage.STAMP).stat().st_mtime_ns
    assert argospackage.ensure_package(bundle, tmp_path / "packages", tmp_path / "checkpoints",
                                       hf_dir=tiny_hf) == out
    assert (out / argospackage.STAMP).stat().st_mtime_ns == stamp  # reused, not rebuilt
    # the converted model decodes what the bundle decodes (its start embedding kept)
    source = sentencepiece.SentencePieceProcessor(model_file=str(out / "sentencepiece.model"))
    tok = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                         bundle.pad_id)
    seq = Seq2Seq.load(bundle, threads=1)
    translator = ctranslate2.Translator(str(out / "model"), compute_type="float32", intra_threads=1)
    sentences = english_sentences(10, seed=31)
    target = bundle.targets["zh-Hans"]
    theirs = translator.translate_batch([[target.token] + source.encode(s, out_type=str) + ["</s>"]
                                         for s in sentences], beam_size=1, max_decoding_length=20)
    ours = seq.greedy_all([tok.encode(s, target.id) for s in sentences], 20)
    pieces = {i: p for p, i in json.loads(bundle.vocab.read_text()).items()}
    # (ours ends with a forced </s> at the limit, CTranslate2 without: 19 tokens compared; without
    # the start embedding folded in, none of the ten agreed; the tiny model's loops hold near-ties)
    same = sum([pieces[i] for i in a.ids][:19] == b.hypotheses[0][:19] for a, b in zip(ours, theirs))
    assert same >= len(sentences) - 2


# -- the launcher on fake argos and LibreTranslate modules ------------------------------------
FAKES = {
    "argostranslate/__init__.py": "",
    "argostranslate/sbd.py": """
        class ISentenceBoundaryDetectionModel:
            pass
        class MiniSBDSentencizer(ISentenceBoundaryDetectionModel):
            def __init__(self, pkg):
                raise RuntimeError("MiniSBD would download its model")
        StanzaSentencizer = SpacySentencizerSmall = MiniSBDSentencizer
    """,
    "argostranslate/package.py": """
        class Package:
            def __init__(self, package_path):
                self.package_path = package_path
                self.tokenizer = "argos's own"
        def update_package_index():
            raise AssertionError("not patched")
    """,
    "argostranslate/translate.py": """
        import types
        from argostranslate.sbd import MiniSBDSentencizer
        class _Translator:
            def __init__(self, path):
                self.calls = []
            def translate_batch(self, source, **kwargs):
                self.calls.append(kwargs)
                return [len(s) for s in source]
        ctranslate2 = types.SimpleNamespace(Translator=_Translator, __version__="fake")
    """,
    "libretranslate/__init__.py": "",
    "libretranslate/init.py": "def download_models(*a):\n    raise AssertionError('not patched')\n",
    "libretranslate/main.py": """
        import json, socket, sys
        def main():
            from argostranslate import package, translate
            out = {"argv": sys.argv}
            out["sentences"] = translate.MiniSBDSentencizer(None).split_sentences("Dr. Watson came. He sat down.  ")
            pkg = package.Package(sys.argv[-1])
            out["encoded"] = pkg.tokenizer.encode("Hello world")
            out["decoded"] = pkg.tokenizer.decode(pkg.tokenizer.target.encode("你好", out_type=str) + ["</s>"])
            for call in (package.update_package_index, __import__("libretranslate.init").init.download_models):
                try:
                    call()
                except OSError as exc:
                    out.setdefault("refused", []).append(str(exc))
            try:
                socket.create_connection(("192.0.2.1", 80), timeout=5)
            except OSError as exc:
                out["socket"] = str(exc)
            t = translate.ctranslate2.Translator("model")
            t.translate_batch([["a", "b"], ["c"]], beam_size=1)
            out["length_calls"] = t._translator.calls if hasattr(t, "_translator") else t.calls
            print("RESULT " + json.dumps(out))
    """,
}


def _launch(tmp_path: Path, tiny: Path, *flags: str) -> tuple[dict, str]:
    fakes = tmp_path / "fakes"
    for name, body in FAKES.items():
        (fakes / name).parent.mkdir(parents=True, exist_ok=True)
        (fakes / name).write_text(textwrap.dedent(body))
    package = tmp_path / "pkg"
    package.mkdir()
    bundle = load_bundle(tiny)
    (package / "metadata.json").write_text(json.dumps(argospackage.package_metadata(bundle, "int8")))
    (package / "sentencepiece.model").write_bytes(bundle.source_spm.read_bytes())
    (package / "target.spm").write_bytes(bundle.target_spm.read_bytes())
    code = (f"import runpy, sys; sys.path.insert(0, {str(fakes)!r}); "
            f"sys.argv = ['ltlauncher', '--segmenter', {str(peer.segmenter_path())!r}, *{list(flags)!r}, '--', "
            f"'--port', '5', {str(package)!r}]; runpy.run_path({ltlauncher.__file__!r}, run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):]), done.stderr


def test_launcher_patches_segmenter_tokens_and_network(tmp_path, tiny_int8):
    out, stderr = _launch(tmp_path, tiny_int8)
    assert out["argv"] == ["libretranslate", "--port", "5", str(tmp_path / "pkg")]
    assert out["sentences"] == ["Dr. Watson came.", "He sat down."]
    assert out["encoded"][0] == ">>cmn_Hans<<" and out["encoded"][-1] == "</s>" and len(out["encoded"]) > 2
    assert out["decoded"] == "你好"
    assert len(out["refused"]) == 2 and all("offline" in r for r in out["refused"])
    assert "offline" in out["socket"]
    assert out["length_calls"] == [{"beam_size": 1}]  # no length patch unless asked
    assert f"{ltlauncher.READY_LINE} segmenter, opus_mt_tokens, offline" in stderr
    assert f"{ltlauncher.REFUSED_LINE} ('192.0.2.1', 80)" in stderr


@pytest.mark.parametrize("length, calls", [
    ("cap", [{"beam_size": 1, "max_decoding_length": 14}]),
    ("exact", [{"beam_size": 1, "min_decoding_length": 14, "max_decoding_length": 14},
               {"beam_size": 1, "min_decoding_length": 12, "max_decoding_length": 12}]),
])
def test_launcher_length_patches_use_the_daemons_limit(tmp_path, tiny_int8, length, calls):
    out, stderr = _launch(tmp_path, tiny_int8, "--length", length, "--max-positions", "100")
    assert out["length_calls"] == calls
    assert f"length_{length}" in stderr
    assert ltlauncher.length_limit(["x"] * 200, 128) == 128


# -- what the report shows ----------------------------------------------------------------------
def test_agreement_ignores_whitespace_and_the_final_mark():
    result = agreement(["他说。", "火车站在哪里?", None], ["他说.", "火车 站在哪里 ?", "x"])
    assert (result["sentences"], result["answered"], result["identical"]) == (3, 2, 2)


def test_report_has_the_ratios_settings_patches_and_command():
    rows = {name: {"seq_req_s": seq, "con_req_s": con, "seq_req_s_all": [seq], "con_req_s_all": [con],
                   "errors": 0} for name, seq, con in (("ours", 40, 140), ("2x1", 60, 130), ("defaults", 15, 15))}
    run = {"model": "demo", "command": "edge-translator bench-serve", "machine": {"cpu": "Some CPU", "cpus": 2},
           "libretranslate": {
               "versions": {"libretranslate": "1.9.6"}, "checkpoint": "unbundled", "ct2_quantization": "int8",
               "options": {"seconds": 20, "tune_seconds": 8, "rounds": 2, "clients": 16},
               "medians": rows, "best": {"sequential": "2x1", "concurrent": "2x1"},
               "ratios": {"sequential": {"best": 0.67, "defaults": 2.67}, "concurrent": {"best": 1.08, "defaults": 9.3}},
               "sweep": {"defaults": {"seq_req_s": 15, "con_req_s": 15, "errors": 0}},
               "errors": 0, "refused_connections": 0,
               "agreement": {"sentences": 24, "answered": 24, "identical": 20, "ours_chars": 30, "theirs_chars": 31},
               "command": "python -I ltlauncher.py -- libretranslate", "environment": {"ARGOS_BEAM_SIZE": "1"},
               "patches": ltlauncher.PATCHES, "measured_by": "edge-translator bench-serve --libretranslate"}}
    text = "\n".join(render_libretranslate(run))
    assert "| sequential (1 client) | 40 | 60 (`2x1`) | 15 | 0.67× | 2.67× |" in text
    assert "| 16 clients | 140 | 130 (`2x1`) | 15 | 1.08× | 9.30× |" in text
    assert "`edge-translator bench-serve --libretranslate` on Some CPU" in text
    assert "ARGOS_BEAM_SIZE=1" in text and "MiniSBD" in text and ">>cmn_Hans<<" in text
    # a run that compared the rounds' ranges gives a ratio only where they do not cross
    run["libretranslate"]["ratios"]["sequential"] |= {"best_apart": True, "defaults_apart": True}
    run["libretranslate"]["ratios"]["concurrent"] |= {"best_apart": False, "defaults_apart": True}
    text = "\n".join(render_libretranslate(run))
    assert "| sequential (1 client) | 40 | 60 (`2x1`) | 15 | 0.67× | 2.67× |" in text
    assert "| 16 clients | 140 | 130 (`2x1`) | 15 | ranges cross (1.08× of the medians) | 9.30× |" in text


def test_the_servers_are_told_apart_only_when_every_round_of_one_is_faster():
    from edge_translator.bench.servebench import _apart

    assert _apart({"k": [10, 11, 12]}, {"k": [7, 8, 9]}, "k") and _apart({"k": [7, 9]}, {"k": [10, 12]}, "k")
    assert not _apart({"k": [10, 11, 12]}, {"k": [8, 9, 10.5]}, "k")


# -- the whole harness, LibreTranslate installed from PyPI ----------------------------------------
@pytest.mark.perf
def test_side_by_side_on_the_tiny_model_runs_offline_without_errors(tiny_int8):
    pytest.importorskip("waitress")
    from edge_translator.bench.servebench import ServeBenchOptions, run_side_by_side
    from edge_translator.toolchain.testmodels import english_sentences

    options = peer.LibreTranslateOptions(work=ROOT / ".cache" / "libretranslate", grid=peer.parse_grid("1x1"),
                                         tune_seconds=1, seconds=1, rounds=1, agreement_sentences=4)
    result = run_side_by_side(tiny_int8, english_sentences(40, 3), ServeBenchOptions(clients=2, threads=1), options)
    assert result["errors"] == 0 and result["refused_connections"] == 0
    assert set(result["applied"]) == {"segmenter", "opus_mt_tokens", "offline", "length_cap"}
    assert result["agreement"]["answered"] == 4
    assert result["ratios"]["sequential"]["best"] and result["ratios"]["concurrent"]["defaults"]
    assert all(isinstance(r[f"{w}_apart"], bool) for r in result["ratios"].values() for w in ("best", "defaults"))
