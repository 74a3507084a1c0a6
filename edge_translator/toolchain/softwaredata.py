"""Software and interface text for the demo model: the zh_CN and zh_TW gettext catalogs of a
fixed list of Debian bookworm (main) packages, cleaned into ``software.tsv``, with whole
packages held out as a software test split and a software dev split.

Packages are read from their ``.deb`` files (fetched with ``apt-get download``, unpacked
with ``dpkg-deb``; nothing is installed, so no dependency comes along) or, with
``installed=True``, from the packages installed on this machine (``dpkg -L``).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import ExportError, InputError, require
from . import gettextdata, helppages
from .traindata import TRAIN_COLUMNS, clean_training, held_keys, write_tsv

logger = logging.getLogger(__name__)

#: The Debian bookworm packages harvested (each ships zh_CN and/or zh_TW gettext catalogs),
#: by kind. ISO code names (iso-codes) and keyboard layouts are left out: names, not text.
PACKAGES: dict[str, tuple[str, ...]] = {
    "gnome": ("gnome-user-docs", "libgtk-3-common", "libgtk2.0-common", "libgtk-4-common", "libglib2.0-data",
              "gsettings-desktop-schemas", "nautilus-data", "gedit-common", "evolution-common",
              "evolution-data-server-common", "gnome-control-center-data", "gnome-shell-common", "totem-common",
              "rhythmbox-data", "evince-common", "gnome-software-common", "gnome-terminal-data",
              "shotwell-common", "cheese-common", "brasero-common", "gnome-settings-daemon-common", "gvfs-common",
              "gnome-disk-utility", "gnome-system-monitor", "baobab", "file-roller", "eog", "seahorse",
              "simple-scan", "meld", "gnome-maps", "gnome-calendar", "gnome-clocks", "gnome-weather",
              "gnome-contacts", "gnome-text-editor", "gnome-tweaks", "deja-dup", "geary", "polari", "gnome-boxes",
              "lollypop", "gnome-music", "network-manager-gnome", "system-config-printer-common",
              "shared-mime-info"),
    "office": ("libreoffice-l10n-zh-cn", "libreoffice-l10n-zh-tw", "gnumeric-common", "gnucash-common",
               "gramps"),
    "graphics": ("gimp-data", "inkscape", "darktable"),
    "media": ("vlc-l10n", "audacity-data", "transmission-gtk"),
    "internet": ("pidgin-data", "filezilla-common", "claws-mail-i18n", "hexchat-common"),
    "kde": ("krita-l10n", "kdevelop-l10n", "kile-l10n"),
    "other-desktops": ("cinnamon-l10n", "thunar-data", "xfce4-panel", "mousepad", "xfce4-settings",
                       "xfce4-session", "caja-common", "atril-common", "engrampa-common", "pluma-common",
                       "mate-control-center-common"),
    "system": ("gparted-common", "synaptic", "coreutils", "util-linux-locales", "apt", "dpkg", "git",
               "tar", "grep", "sed", "findutils", "diffutils", "bash", "systemd", "e2fsprogs-l10n", "gnupg-l10n",
               "libc-l10n", "wget", "make"),
}
#: Whole source packages held out (a GNOME app, a wxWidgets app and a command-line tool for
#: test; a GTK app and a command-line tool for dev): none of their strings, English or
#: Chinese, is in software.tsv.
HELDOUT: dict[str, tuple[str, ...]] = {
    "test": ("gnome-software", "filezilla", "apt"),
    "dev": ("meld", "sed"),
}
_LOCALE = re.compile(r"/(zh[_-](?:CN|TW|Hans|Hant))/LC_MESSAGES/([^/]+)\.(mo|po)$")
_HELP = re.compile(r"^/usr/share/help/(zh_CN|zh_TW)/(.+\.page)$")
_SIMPLIFIED = ("zh_CN", "zh-CN", "zh_Hans", "zh-Hans")


def package_names() -> list[str]:
    """Every harvested package, in :data:`PACKAGES` order."""
    return [name for names in PACKAGES.values() for name in names]


@dataclass
class PackageTree:
    """One package's files, read from an unpacked ``.deb`` or from the installed system."""

    name: str
    version: str
    source: str
    section: str
    root: Path
    """Where the package's paths are rooted (``/`` for an installed package)."""
    files: list[str] = field(default_factory=list)
    """The package's paths, absolute (``/usr/share/...``)."""

    def path(self, name: str) -> Path:
        return self.root / name.lstrip("/")


def _run(args: list[str], cwd: Path | None = None) -> str:
    try:
        return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise ExportError(f"{args[0]} is not installed: the software harvest runs on Debian") from None
    except subprocess.CalledProcessError as exc:
        message = (exc.stderr or exc.stdout or "").strip().splitlines()
        raise ExportError(f"`{' '.join(args)}` failed: {message[-1] if message else exc.returncode}") from None


def fetch_debs(names: Iterable[str], folder: Path) -> dict[str, Path]:
    """The ``.deb`` of each package in ``folder``, downloaded with ``apt-get download`` when missing.

    Raises:
        ExportError: If apt cannot download one (run ``apt-get update`` first).
    """
    folder.mkdir(parents=True, exist_ok=True)
    debs = {}
    for name in names:
        found = sorted(folder.glob(f"{name}_*.deb"))
        if not found:
            logger.info("apt-get download %s", name)
            _run(["apt-get", "download", name], cwd=folder)
            found = sorted(folder.glob(f"{name}_*.deb"))
            if not found:
                raise ExportError(f"apt-get download {name} wrote no {name}_*.deb in {folder}")
        debs[name] = found[-1]
    return debs


def unpack_deb(deb: Path, dest: Path) -> PackageTree:
    """A ``.deb`` unpacked with ``dpkg-deb -x`` into ``dest`` (reused when already there)."""
    fields = _run(["dpkg-deb", "-f", str(deb), "Package", "Version", "Source", "Section"])
    info = dict(line.split(": ", 1) for line in fields.splitlines() if ": " in line)
    done = dest / ".unpacked"
    if not done.is_file():
        dest.mkdir(parents=True, exist_ok=True)
        _run(["dpkg-deb", "-x", str(deb), str(dest)])
        done.write_text(deb.name)
    files = sorted("/" + str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file() and p != done)
    name = info["Package"]
    return PackageTree(name, info["Version"], info.get("Source", name).split(" ")[0], info.get("Section", ""),
                       dest, files)


def installed_package(name: str) -> PackageTree:
    """An installed package, through ``dpkg-query`` and ``dpkg -L``.

    Raises:
        ExportError: If the package is not installed.
    """
    fields = _run(["dpkg-query", "-W", "-f", "${Version}\t${source:Package}\t${Section}", name])
    version, source, section = fields.split("\t")
    files = [line for line in _run(["dpkg", "-L", name]).splitlines() if Path(line).is_file()]
    return PackageTree(name, version, source, section, Path("/"), files)


def _paragraphs(copyright_text: str) -> list[dict[str, str]]:
    paragraphs = []
    for block in re.split(r"\n[ \t]*\n", copyright_text):
        fields = dict((m.group(1).lower(), m.group(2).strip())
                      for m in re.finditer(r"^([A-Za-z-]+):[ \t]*(.*)$", block, re.M))
        if fields:
            paragraphs.append(fields)
    return paragraphs


def licences(copyright_text: str) -> dict[str, str]:
    """The licences a package's ``debian/copyright`` gives.

    Returns:
        ``{"licence": ..., "translations": ...}``: in the machine-readable format, the
        ``License:`` of the ``Files: *`` paragraph and of the last paragraph whose ``Files:``
        match ``po/zh_CN.po`` (the catalogs' sources); in free-form text, the first licence
        named in ``/usr/share/common-licenses/`` (or a well-known licence's name), for both.
    """
    from fnmatch import fnmatchcase

    if copyright_text.lstrip().lower().startswith("format:"):
        main = translations = None
        for fields in _paragraphs(copyright_text):
            patterns = fields.get("files", "").split()
            if not patterns or not fields.get("license"):
                continue
            if "*" in patterns and main is None:
                main = fields["license"]
            if any(fnmatchcase(target, pattern) for pattern in patterns
                   for target in ("po/zh_CN.po", "po/zh_TW.po")):
                translations = fields["license"]
        if main:
            return {"licence": main, "translations": translations or main}
    named = re.search(r"/usr/share/common-licenses/([\w.+-]+)", copyright_text)
    if named:
        name = named.group(1).rstrip(".")
        return {"licence": name, "translations": name}
    for pattern, name in ((r"Lesser General Public License", "LGPL"), (r"Library General Public", "LGPL"),
                          (r"GNU General Public License", "GPL"), (r"Mozilla Public License", "MPL"),
                          (r"Apache License", "Apache")):
        if re.search(pattern, copyright_text):
            return {"licence": name, "translations": name}
    return {"licence": "unknown (see copyright)", "translations": "unknown (see copyright)"}


def package_licences(tree: PackageTree, docs: Callable[[str], PackageTree | None] | None = None) -> dict[str, str]:
    """:func:`licences` of ``/usr/share/doc/NAME/copyright``, "unknown" when absent.

    Args:
        docs: When the package's doc folder is a link to another package's (``transmission-gtk``
            → ``transmission-common``), gives that package, or None.
    """
    path = tree.path(f"/usr/share/doc/{tree.name}/copyright")
    folder = tree.path(f"/usr/share/doc/{tree.name}")
    if not path.is_file() and folder.is_symlink() and docs is not None:
        other = docs(Path(folder.readlink()).name)
        if other is not None:
            path = other.path(f"/usr/share/doc/{other.name}/copyright")
    if not path.is_file():
        return {"licence": "unknown (no copyright file)", "translations": "unknown (no copyright file)"}
    return licences(path.read_text(encoding="utf-8", errors="replace"))


def catalogs(tree: PackageTree) -> dict[str, dict[str, str]]:
    """``{"hans"|"hant": {domain: path}}``: the package's Chinese catalogs (``.mo`` preferred)."""
    found: dict[str, dict[str, str]] = {"hans": {}, "hant": {}}
    for path in tree.files:
        match = _LOCALE.search(path)
        if match:
            script = "hans" if match.group(1) in _SIMPLIFIED else "hant"
            domain = match.group(2)
            if domain not in found[script] or match.group(3) == "mo":
                found[script][domain] = path
    return found


def help_pages(tree: PackageTree) -> dict[str, dict[str, tuple[str, str]]]:
    """``{"hans"|"hant": {page: (english path, chinese path)}}``: the package's translated
    Mallard help pages (``/usr/share/help/zh_CN/APP/x.page``) that have an English original."""
    files = set(tree.files)
    found: dict[str, dict[str, tuple[str, str]]] = {"hans": {}, "hant": {}}
    for path in tree.files:
        match = _HELP.match(path)
        if match and f"/usr/share/help/C/{match.group(2)}" in files:
            found["hans" if match.group(1) == "zh_CN" else "hant"][match.group(2)] = (
                f"/usr/share/help/C/{match.group(2)}", path)
    return found


def read_catalog(path: Path) -> list[gettextdata.CatalogEntry]:
    """A ``.mo`` or ``.po`` file's messages."""
    if path.suffix == ".po":
        return gettextdata.read_po(path.read_text(encoding="utf-8"), str(path))
    return gettextdata.read_mo(path.read_bytes(), str(path))


@dataclass
class PackageHarvest:
    """What one source package gave, through its binary packages."""

    name: str
    """The Debian source package: the ``origin`` of its rows."""
    rows: list[tuple[str, str, str, str]]
    """Clean ``(origin, zh_hans, zh_hant, en)`` rows (not yet deduplicated)."""
    report: dict


def harvest_package(trees: list[PackageTree], t2s: Callable[[str], str], tw2sp: Callable[[str], str],
                    options: gettextdata.CleanOptions | None = None,
                    docs: Callable[[str], PackageTree | None] | None = None) -> PackageHarvest:
    """The clean pairs of the zh_CN and zh_TW catalogs of one source package's binaries.

    A message of a Simplified catalog gives ``zh_hans`` (through OpenCC ``t2s``: some
    zh_CN catalogs hold Traditional characters); the same message (domain, context,
    English) in a Traditional catalog gives ``zh_hant``, left empty when there is none. The
    blocks of translated help pages (:mod:`.helppages`) are messages too, with the page as
    their domain. A
    message found only in a Traditional catalog gives both, its Simplified text through
    OpenCC ``tw2sp`` (Taiwan phrases to Mainland ones: 檔案 → 文件). ``docs`` is passed to
    :func:`package_licences`.
    """
    name = trees[0].source
    report = {"name": name, "binaries": [{"name": t.name, "version": t.version, "section": t.section,
                                          **package_licences(t, docs)} for t in trees],
              "catalogs": [], "raw_entries": {"zh_CN": 0, "zh_TW": 0},
              "help": {"pages": 0, "mismatched_pages": 0, "blocks": 0},
              "drops": {"zh_CN": Counter(), "zh_TW": Counter()}, "errors": []}
    report.update({k: report["binaries"][0][k] for k in ("version", "licence", "translations")})
    pairs: dict[str, dict[tuple, str]] = {"hans": {}, "hant": {}}
    for tree in trees:
        found = catalogs(tree)
        for script, locale in (("hans", "zh_CN"), ("hant", "zh_TW")):
            for domain, path in sorted(found[script].items()):
                report["catalogs"].append(f"{tree.name}:{path}")
                try:
                    entries = read_catalog(tree.path(path))
                except InputError as exc:
                    report["errors"].append(str(exc))
                    logger.warning("%s", exc)
                    continue
                report["raw_entries"][locale] += len(entries)
                for context, en, zh in gettextdata.entry_pairs(entries, report["drops"][locale], options):
                    pairs[script].setdefault((domain, context, en), zh)
        for script, locale in (("hans", "zh_CN"), ("hant", "zh_TW")):
            for page, (original, translated) in sorted(help_pages(tree)[script].items()):
                blocks = helppages.page_pairs(tree.path(original).read_bytes(), tree.path(translated).read_bytes())
                if blocks is None:
                    report["help"]["mismatched_pages"] += 1
                    continue
                report["help"]["pages"] += 1
                report["help"]["blocks"] += len(blocks)
                for en, zh in blocks:
                    result = gettextdata.clean_pair(en, zh, options)
                    if isinstance(result, str):
                        report["drops"][locale][result] += 1
                    else:
                        pairs[script].setdefault((f"help:{page}", None, result[0]), result[1])
    rows = []
    for key, zh in pairs["hans"].items():
        rows.append((name, t2s(zh), pairs["hant"].get(key, ""), key[2]))
    for key, zh in pairs["hant"].items():
        if key not in pairs["hans"]:
            rows.append((name, tw2sp(zh), zh, key[2]))
    report["drops"] = {locale: dict(sorted(c.items())) for locale, c in report["drops"].items()}
    report["pairs"] = len(rows)
    return PackageHarvest(name, rows, report)


def _check_main(tree: PackageTree) -> None:
    if tree.section.startswith(("contrib/", "non-free")):
        raise ExportError(f"{tree.name} is in Debian's {tree.section.split('/')[0]}, not main: "
                          "only DFSG-free packages may be harvested")


def split_packages(harvests: list[PackageHarvest], heldout: dict[str, tuple[str, ...]],
                   to_traditional: Callable[[str], str]) -> tuple[dict[str, list], dict]:
    """Train, test and dev rows: whole packages held out, overlaps removed, one row per English.

    Returns:
        ``({"train", "test", "dev": rows}, stats)``. No train row shares normalised English,
        Simplified or Traditional text (:func:`.traindata.normalize_key`, Chinese also in
        its ``to_traditional`` form) with any string of a held-out package; no dev row shares
        any with the test split.

    Raises:
        ValueError: If a held-out package is not among the harvests, or in both splits.
    """
    names = {h.name for h in harvests}
    test, dev = set(heldout.get("test", ())), set(heldout.get("dev", ()))
    if missing := (test | dev) - names:
        raise ValueError(f"held-out packages not harvested: {', '.join(sorted(missing))}")
    if both := test & dev:
        raise ValueError(f"packages held out for both test and dev: {', '.join(sorted(both))}")
    rows = {"train": [], "test": [], "dev": []}
    for harvest in harvests:
        split = "test" if harvest.name in test else "dev" if harvest.name in dev else "train"
        rows[split].extend(harvest.rows)
    stats: dict = {"candidates": {k: len(v) for k, v in rows.items()}}

    def keys(part: list) -> set[str]:
        return held_keys([r[1] for r in part] + [r[2] for r in part if r[2]] + [r[3] for r in part],
                         to_traditional)

    test_rows, dropped_test = gettextdata.choose_translations(rows["test"])
    dev_rows, dropped_dev = gettextdata.choose_translations(rows["dev"])
    dev_rows, removed_dev = clean_training(dev_rows, keys(rows["test"]))
    train_rows, removed_train = clean_training(rows["train"], keys(rows["test"] + rows["dev"]))
    train_rows, dropped_train = gettextdata.choose_translations(train_rows)
    stats["removed_overlap"] = {"train": removed_train, "dev": removed_dev}
    stats["deduplicated"] = {"train": dict(dropped_train), "test": dict(dropped_test), "dev": dict(dropped_dev)}
    return {"train": train_rows, "test": test_rows, "dev": dev_rows}, stats


def training_terms(harvests: list[PackageHarvest], heldout: dict[str, tuple[str, ...]]) -> list[tuple]:
    """The short interface strings of the training packages, before the overlap filter.

    Returns:
        ``(origin, zh_hans, zh_hant, en)`` rows whose English is a term of one to three
        words (:func:`.dictterms.interface_string`), from every package but the held-out ones,
        one row per package, English and Simplified text (the first non-empty Traditional
        text kept), not deduplicated across packages: the dictionary counts how many packages
        agree. A string a held-out package also has stays ("Open File"), from the training
        packages that have it, never from the held-out package's catalog; ``software.tsv``
        still leaves it out.
    """
    from .dictterms import interface_string

    held = {name for names in heldout.values() for name in names}
    rows: dict[tuple[str, str, str], list] = {}
    for harvest_ in harvests:
        if harvest_.name in held:
            continue
        for origin, hans, hant, en in harvest_.rows:
            if interface_string(en) is None:
                continue
            row = rows.setdefault((origin, hans, en), [origin, hans, hant, en])
            row[2] = row[2] or hant
    return [tuple(row) for row in rows.values()]


def harvest(out: Path, debs: Path | None = None, installed: bool = False,
            names: Iterable[str] | None = None, heldout: dict[str, tuple[str, ...]] | None = None,
            options: gettextdata.CleanOptions | None = None) -> dict[str, Path]:
    """Harvest the packages' catalogs into ``out``.

    Writes ``software.tsv`` (training rows, :data:`.traindata.TRAIN_COLUMNS`),
    ``software-test.tsv`` and ``software-dev.tsv`` (the held-out packages, same columns;
    ``edge-translator eval --pairs`` reads them), ``software-terms.tsv`` (the training
    packages' strings of one to three words before the overlap filter, per package, same
    columns: :func:`training_terms`, for the dictionary's interface terms) and ``software-sources.json`` (per package:
    version, licence, catalogs, raw entries, pairs, drops by reason; the splits and totals).

    Args:
        out: The folder to write (created).
        debs: Where the ``.deb`` files are (downloaded there when missing; default
            ``out/debs``); they are unpacked under ``out/unpacked``.
        installed: Read the installed packages instead of ``.deb`` files.
        names: The packages (default :func:`package_names`).
        heldout: The held-out packages (default :data:`HELDOUT`).

    Returns:
        ``{"train", "test", "dev", "terms", "sources": path}``.

    Raises:
        ExportError: A package that cannot be fetched, read, or is not in Debian main.
    """
    opencc = require("opencc", "train")
    t2s, tw2sp, s2tw = opencc.OpenCC("t2s"), opencc.OpenCC("tw2sp"), opencc.OpenCC("s2tw")
    names = list(names or package_names())
    heldout = HELDOUT if heldout is None else heldout
    out.mkdir(parents=True, exist_ok=True)
    debs = debs or out / "debs"

    def docs(name: str) -> PackageTree | None:  # the package a doc folder links to
        if installed or not re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", name):
            return None
        return unpack_deb(fetch_debs([name], debs)[name], out / "unpacked" / name)

    if installed:
        trees = [installed_package(name) for name in names]
    else:
        paths = fetch_debs(names, debs)
        trees = [unpack_deb(paths[name], out / "unpacked" / name) for name in names]
    by_source: dict[str, list[PackageTree]] = {}
    for tree in trees:
        _check_main(tree)
        by_source.setdefault(tree.source, []).append(tree)
    harvests = []
    for group in by_source.values():
        harvests.append(harvest_package(group, t2s.convert, tw2sp.convert, options, docs))
        logger.info("%s %s: %d pairs", harvests[-1].name, group[0].version, len(harvests[-1].rows))
    splits, stats = split_packages(harvests, heldout, s2tw.convert)
    files = {"train": out / "software.tsv", "test": out / "software-test.tsv", "dev": out / "software-dev.tsv",
             "terms": out / "software-terms.tsv", "sources": out / "software-sources.json"}
    for split in ("train", "test", "dev"):
        write_tsv(files[split], splits[split])
    terms = training_terms(harvests, heldout)
    write_tsv(files["terms"], terms)
    kept = {split: Counter(r[0] for r in rows) for split, rows in splits.items()}
    packages = []
    for harvest_ in harvests:
        report = dict(harvest_.report)
        name = report["name"]
        report["split"] = next((s for s in ("test", "dev") if name in heldout.get(s, ())), "train")
        report["kept"] = kept[report["split"]].get(name, 0)
        packages.append(report)
    drops = {"zh_CN": Counter(), "zh_TW": Counter()}
    for report in packages:
        for locale, counts in report["drops"].items():
            drops[locale].update(counts)
    sources = {
        "columns": list(TRAIN_COLUMNS),
        "debian": "bookworm, main",
        "heldout": {k: list(v) for k, v in heldout.items()},
        "totals": {"packages": len(packages),
                   "raw_entries": {loc: sum(p["raw_entries"][loc] for p in packages) for loc in ("zh_CN", "zh_TW")},
                   "pairs": sum(p["pairs"] for p in packages),
                   "train": len(splits["train"]), "test": len(splits["test"]), "dev": len(splits["dev"]),
                   "terms": len(terms),
                   "drops": {loc: dict(sorted(c.items())) for loc, c in drops.items()}, **stats},
        "chinese": "zh_hans: zh_CN through OpenCC t2s, or zh_TW through tw2sp when only zh_TW has the message; "
                   "zh_hant: the zh_TW catalog's text, empty when it has none",
        "terms": "software-terms.tsv: the training packages' strings of 1-3 words, one row per package, English and "
                 "Simplified text, before the overlap filter (for the dictionary's interface terms, never the "
                 "model's training data)",
        "placeholders": "kept verbatim; a pair is kept only when both sides hold the same multiset",
        "packages": packages,
    }
    files["sources"].write_text(json.dumps(sources, indent=1, ensure_ascii=False), encoding="utf-8")
    return files


def summary(files: dict[str, Path]) -> str:
    """What a harvest wrote, for the command's output: packages, pairs per split, where."""
    totals = json.loads(files["sources"].read_text(encoding="utf-8"))["totals"]
    lines = [f"{totals['packages']} packages, {sum(totals['raw_entries'].values())} catalog entries, "
             f"{totals['pairs']} clean pairs"]
    lines += [f"{split:5s} {totals[split]:7d} pairs  {files[split]}" for split in ("train", "test", "dev")]
    if "terms" in totals:
        lines.append(f"terms {totals['terms']:7d} pairs  {files['terms']} (training packages' 1-3 word strings, "
                     "before the overlap filter)")
    lines.append(f"sources, licences and drops: {files['sources']}")
    return "\n".join(lines)
