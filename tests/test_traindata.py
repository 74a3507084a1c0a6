"""The embedded model's training data: CC-CEDICT cleaning, the held-out word sample and its
metric, split cleanliness across sources, and Traditional targets (tiny inputs only)."""

import json

import pytest

from edge_translator.toolchain import dictionary
from edge_translator.toolchain.dictionary import (
    DictionaryOptions,
    clean_gloss,
    parse_cedict,
)
from edge_translator.toolchain.traindata import clean_training, held_keys, normalize_key

CEDICT = """\
# CC-CEDICT test slice
貓 猫 [mao1] /cat/CL:隻|只[zhi1]/(dialect) to hide oneself/(coll.) modem/
吃 吃 [chi1] /to eat/to consume/to destroy/to stammer (Taiwan pr. for this sense is [ji2])/
喫 吃 [chi1] /variant of 吃[chi1]/
狗 狗 [gou3] /dog/CL:隻|只[zhi1],條|条[tiao2]/
書 书 [shu1] /book/letter/abbr. for 書經|书经[Shu1 jing1]/
水 水 [shui3] /water/river/liquid/surname Shui/
電腦 电脑 [dian4 nao3] /computer/CL:臺|台[tai2]/
計算機 计算机 [ji4 suan4 ji1] /computer/calculator/(Tw) calculator/
貓哭老鼠 猫哭老鼠 [mao1 ku1 lao3 shu3] /the cat weeps for the dead mouse (idiom); hypocritical pretence/
3C 3C [san1 C] /abbr. for computers, communications, and consumer electronics/
王 王 [Wang2] /surname Wang/
學生 学生 [xue2 sheng5] /student/schoolchild/
朋友 朋友 [peng2 you5] /friend/
"""
LEVELS = {"猫": 1, "吃": 1, "狗": 1, "书": 1, "水": 1, "电脑": 1, "学生": 1, "朋友": 1}


def _to_hant(text: str) -> str:  # enough of OpenCC s2tw for these tests
    return text.translate(str.maketrans("猫书电脑学计这个", "貓書電腦學計這個"))


@pytest.mark.parametrize("gloss, cleaned", [
    ("cat", "cat"),
    ("to eat", "eat"),
    ("a bargain", "bargain"),
    ("to eat at (a cafeteria etc)", "eat at"),
    ("to look after sb", "look after someone"),
    ("CL:隻|只[zhi1]", None),
    ("variant of 吃[chi1]", None),
    ("old variant of 貓|猫[mao1]", None),
    ("see 貓膩|猫腻[mao1 ni4]", None),
    ("abbr. for computers", None),
    ("surname Wang", None),
    ("(dialect) to hide oneself", None),
    ("the cat weeps for the dead mouse (idiom)", None),
    ("hypocritical pretence of condolence for a friend", None),  # too long
    ("mao1", None),
    ("COVID-19", None),
    ("Beijing", "Beijing"),
])
def test_gloss_cleaning(gloss, cleaned):
    assert clean_gloss(gloss, max_words=4) == cleaned


def test_entries_give_bare_word_pairs_without_cross_references():
    entries = parse_cedict(CEDICT.splitlines())
    assert len(entries) == 13
    pairs = dictionary.dictionary_pairs(entries, dictionary.commonness(LEVELS, {}), set(), set(),
                                        DictionaryOptions(glosses_per_entry=2))
    assert ("cat", "猫") in pairs and ("eat", "吃") in pairs and ("computer", "电脑") in pairs
    assert not any(zh in ("3C", "王", "猫哭老鼠") for _, zh in pairs)
    assert all(en[-1].isalnum() and zh[-1] not in "。！？" for en, zh in pairs)
    assert ("destroy", "吃") not in pairs  # only the first two glosses of an entry


def test_heldout_sample_is_deterministic_and_left_out_of_training():
    entries = parse_cedict(CEDICT.splitlines())
    options = DictionaryOptions(heldout_size=3)
    sample = dictionary.heldout_sample(entries, LEVELS, options)
    assert sample == dictionary.heldout_sample(list(reversed(entries)), LEVELS, options)
    assert len(sample) == 3 and all(zh in LEVELS and len(en.split()) <= 2 for en, zh in sample)
    english = {dictionary.normalize_word(en) for en, _ in sample}
    heads = {zh for _, zh in sample}
    pairs = dictionary.dictionary_pairs(entries, dictionary.commonness(LEVELS, {}), english, heads, options)
    assert pairs
    assert not any(dictionary.normalize_word(en) in english or zh in heads for en, zh in pairs)


def test_single_word_metric_accepts_any_headword_with_that_gloss(tmp_path):
    entries = parse_cedict(CEDICT.splitlines())
    index = dictionary.gloss_index(entries)
    assert index["computer"] == {"电脑", "计算机"}
    sample = [("computer", "电脑"), ("cat", "猫"), ("friend", "朋友")]
    path = tmp_path / "heldout.tsv"
    dictionary.write_heldout(path, sample, index)
    assert path.read_text(encoding="utf-8").splitlines()[0] == "computer\t电脑\t电脑|计算机"
    read_sample, read_index = dictionary.read_heldout(path)
    assert read_sample == sample
    answers = {"computer": "计算机。", "cat": "猫猫。", "friend": " 朋友 "}
    result = dictionary.single_word_accuracy(lambda words: [answers[w] for w in words], read_sample, read_index)
    assert (result["right"], result["words"], result["accuracy"]) == (2, 3, 0.6667)
    assert result["wrong"] == [("cat", "猫猫。")]


def test_no_training_pair_shares_text_with_test_dev_or_heldout():
    evaluation = [(20, "这是我的书。", 1, "This is my book."), (21, "你好。", 2, "Hello!")]
    sample = [("cat", "猫")]
    held = held_keys([r[1] for r in evaluation] + [r[3] for r in evaluation], _to_hant)
    held |= held_keys([en for en, _ in sample] + [zh for _, zh in sample], _to_hant)
    rows = [
        ("tatoeba", "這是我的書", "這是我的書", "It's my book."),  # Traditional form of a test sentence
        ("hsk", "你好！", "你好！", "Hi."),                          # Chinese equals dev's
        ("cedict", "问候", "問候", "hello"),                          # English equals dev's
        ("cedict", "猫", "貓", "kitty"),                              # held-out headword
        ("cedict", "猫咪", "貓咪", "Cat"),                            # held-out English
        ("cedict", "狗", "狗", "dog"),                                # kept
    ]
    kept, removed = clean_training(rows, held)
    assert [r[1] for r in kept] == ["狗"] and removed == 5
    for row in kept:
        assert not {normalize_key(row[1]), normalize_key(row[2]), normalize_key(row[3])} & held


def test_traditional_pairs_carry_the_hant_token(tiny_hf):
    spm = pytest.importorskip("sentencepiece")
    from edge_translator.toolchain.train import (
        HANT_TOKEN,
        LANG_TOKEN,
        encode_pairs,
        epoch_pairs,
    )

    vocab = json.loads((tiny_hf / "vocab.json").read_text(encoding="utf-8"))
    target = spm.SentencePieceProcessor(model_file=str(tiny_hf / "target.spm"))
    known = [target.id_to_piece(i).lstrip("▁") for i in range(3, 40)]
    known = [p for p in known if p]
    rows = [("tatoeba", known[0] + known[1], known[1] + known[0], "the water"),
            ("cedict", known[2], known[2], "water"), ("cedict", "龥龤", "龥龤", "rare")]
    encoded = encode_pairs(tiny_hf, rows)
    assert len(encoded) == 2  # the target with unknown characters is left out
    for src, tgt, src_t, tgt_t in encoded:
        assert src[0] == vocab[LANG_TOKEN] and src_t[0] == vocab[HANT_TOKEN] and src[1:] == src_t[1:]
        assert tgt[-1] == 0 and tgt_t[-1] == 0
    epoch = epoch_pairs(encoded * 200, epoch=3, seed=1, fraction=0.3)
    assert epoch == epoch_pairs(encoded * 200, epoch=3, seed=1, fraction=0.3)
    share = sum(src[0] == vocab[HANT_TOKEN] for src, _ in epoch) / len(epoch)
    assert 0.2 < share < 0.4
    assert epoch_pairs(encoded, 0, 1, 0.0) == [(p[0], p[1]) for p in encoded]


def test_checkpoint_is_float16_and_exports_as_float32(tmp_path, tiny_hf):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from edge_translator.toolchain.marian import load_model
    from edge_translator.toolchain.train import save_checkpoint

    out = save_checkpoint(tiny_hf, tmp_path / "checkpoint")
    assert (out / "model.safetensors").is_file() and (out / "vocab.json").is_file()
    from safetensors.torch import load_file

    assert {t.dtype for t in load_file(str(out / "model.safetensors")).values()} == {torch.float16}
    model, _ = load_model(out)
    assert next(model.parameters()).dtype == torch.float32
    original = transformers.MarianMTModel.from_pretrained(str(tiny_hf), dtype=torch.float32)
    for (name, a), b in zip(original.state_dict().items(), model.state_dict().values()):
        assert torch.allclose(a, b, atol=2e-3 * max(1.0, a.abs().max().item())), name
    with pytest.raises(Exception, match="already exists"):
        save_checkpoint(tiny_hf, out)
