"""``edge-translator models``: list, add, remove, verify, default and pack.

Declaring the subcommands imports nothing heavy; converting a model needs the light
``convert`` extra (onnx, safetensors, huggingface_hub, PyYAML), never torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

def add_parsers(sub) -> None:
    """Add ``models`` and its subcommands."""
    from ..core.bundle import DEFAULT_SCHEME, SCHEME_MODES

    mo = sub.add_parser("models", help="list, add, remove, verify, pack the models and choose the default",
                        description="The models there are: the embedded ones, $EDGE_TRANSLATOR_MODEL and the "
                        "user's models folder ($EDGE_TRANSLATOR_MODELS_DIR, else the application-data folder the "
                        "desktop app uses). An installed model is used with --model NAME.")
    msub = mo.add_subparsers(dest="models_command", required=True)

    ls = msub.add_parser("list", help="every model: name, where it is from, scheme, size, scores, folder")
    ls.add_argument("--json", action="store_true", help="one JSON object per model, one per line")
    ls.set_defaults(func=cmd_list)

    ad = msub.add_parser("add", help="convert (without PyTorch), verify and install a model",
                         description="SOURCE is a Hugging Face hub id (Helsinki-NLP/opus-mt-en-zh), a local "
                         "Hugging Face MarianMT folder (model.safetensors or pytorch_model.bin), an OPUS-MT / "
                         "Tatoeba-Challenge Marian release (its .zip, or its folder with the .npz, source.spm, "
                         "target.spm, vocab.yml and decoder.yml), a bundle folder, a .tar made by `models pack`, "
                         "or an https URL to a .tar or a release .zip. If anything fails, nothing is installed.")
    ad.add_argument("source")
    ad.add_argument("--name", help="install under this name (default: from the source)")
    ad.add_argument("--force", action="store_true", help="replace an installed model of that name")
    ad.add_argument("--quantize", choices=tuple(SCHEME_MODES), default=DEFAULT_SCHEME,
                    help=f"weights of a converted model (default {DEFAULT_SCHEME}; docs/models.md#weight-schemes)")
    ad.add_argument("--shortlist", action="store_true", help="also build a vocabulary shortlist (export --shortlist)")
    ad.add_argument("--default", action="store_true", help="also make it the default model")
    ad.add_argument("--quiet", action="store_true", help="no progress bar")
    ad.set_defaults(func=cmd_add)

    rm = msub.add_parser("remove", help="remove an installed model")
    rm.add_argument("name")
    rm.set_defaults(func=cmd_remove)

    ve = msub.add_parser("verify", help="check every file of every model (or of NAME) against its checksum")
    ve.add_argument("name", nargs="?")
    ve.set_defaults(func=cmd_verify)

    de = msub.add_parser("default", help="the model used without --model: show it, or set it to NAME")
    de.add_argument("name", nargs="?")
    de.set_defaults(func=cmd_default)

    pk = msub.add_parser("pack", help="write a model into one .tar file, to copy to another machine "
                         "(`models add FILE` there)")
    pk.add_argument("name", help="an installed or embedded model's name, or a bundle folder")
    pk.add_argument("file", help="the .tar to write")
    pk.add_argument("--force", action="store_true", help="replace FILE if it exists")
    pk.set_defaults(func=cmd_pack)


def _resolve(name: str) -> Path:
    """A model name (installed, then embedded) or a bundle folder."""
    from ..core.errors import InputError
    from ..core.locations import installed, models_dir, valid_name

    path = installed(name)
    if path is not None:
        return path
    if valid_name(name) and (models_dir() / name / "bundle.json").is_file():
        return models_dir() / name
    if Path(name).is_dir():
        return Path(name)
    raise InputError(f"no model called {name!r}; `edge-translator models list` shows them")


def _score(entry) -> str:
    evaluation = entry.figures.get("evaluation") or {}
    bleu = evaluation.get("bleu") if isinstance(evaluation, dict) else None
    return f"BLEU {bleu}" if bleu is not None else ""


def cmd_list(args: argparse.Namespace) -> int:
    """Print every model, the default first marked."""
    from ..core.errors import EdgeTranslatorError
    from ..core.locations import resolve_model, user_models_dir
    from .catalog import find_bundles
    from .install import clean_leftovers

    clean_leftovers(user_models_dir())  # a model whose replacement was cut short is listed again
    entries = find_bundles()
    try:
        current = resolve_model(None).resolve()
    except EdgeTranslatorError:
        current = None
    for entry in entries:
        is_default = current is not None and entry.path.resolve() == current
        if args.json:
            print(json.dumps({"name": entry.path.name, "model": entry.name, "origin": entry.origin,
                              "scheme": entry.scheme, "size_mb": round(entry.size_mb, 1), "targets": entry.targets,
                              "path": str(entry.path), "default": is_default, "error": entry.error,
                              "evaluation": entry.figures.get("evaluation")}, ensure_ascii=False))
            continue
        mark = "*" if is_default else " "
        facts = [entry.origin, entry.scheme, f"{entry.size_mb:.1f} MB", ", ".join(entry.targets), _score(entry)]
        print(f"{mark} {entry.path.name:28s} {' · '.join(f for f in facts if f)}")
        print(f"  {'':28s} {entry.path}" + (f"\n  {'':28s} BROKEN: {entry.error}" if entry.error else ""))
    if not args.json:
        print("(* the default: used without --model)")
    return 0


class _Bar:
    """Progress on stderr: a tqdm bar per stage where tqdm is installed, else a line per stage."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.stage = None
        self.bar = None
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        self.tqdm = tqdm

    def __call__(self, stage: str, done: float, total: float | None) -> None:
        if self.quiet:
            return
        if stage != self.stage:
            self.close()
            self.stage = stage
            if self.tqdm is not None:
                unit = "B" if stage in ("downloading", "unpacking", "copying") else "step"
                self.bar = self.tqdm(total=total, desc=stage, unit=unit, unit_scale=unit == "B", leave=False,
                                     file=sys.stderr)
            else:
                print(f"edge-translator: {stage} ...", file=sys.stderr)
        if self.bar is not None:
            if total is not None and self.bar.total != total:
                self.bar.total = total
            self.bar.n = done
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def cmd_add(args: argparse.Namespace) -> int:
    """Install SOURCE; print where it went."""
    from . import install

    export = None
    install.check_converter(args.source)
    if install.identify(args.source).kind not in install.AS_THEY_ARE:
        from ..toolchain.export import ExportOptions
        from ..toolchain.quantize import SCHEME_MODES, QuantizeOptions

        export = ExportOptions(quantize=QuantizeOptions(mode=SCHEME_MODES[args.quantize]), shortlist=args.shortlist)
    bar = _Bar(args.quiet)
    try:
        path = install.add(args.source, install.AddOptions(name=args.name, force=args.force, export=export), bar)
    finally:
        bar.close()
    if args.default:
        install.set_default(path.name)
    print(f"installed {path.name} in {path}; use it with --model {path.name}"
          + (" (now the default)" if args.default else ""))
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    from . import install

    path = install.remove(args.name)
    print(f"removed {args.name} ({path})")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Check checksums; exit 3 if any model is broken."""
    from ..core.bundle import load_bundle
    from ..core.errors import EdgeTranslatorError
    from .catalog import describe, find_bundles

    entries = [describe(_resolve(args.name), "named")] if args.name else find_bundles()
    broken = 0
    for entry in entries:
        error = entry.error
        if error is None:
            try:
                load_bundle(entry.path)
            except EdgeTranslatorError as exc:
                error = str(exc)
        broken += error is not None
        print(f"{'ok    ' if error is None else 'BROKEN'} {entry.path.name:28s} {error or entry.path}")
    return 3 if broken else 0


def cmd_default(args: argparse.Namespace) -> int:
    from ..core.locations import resolve_model
    from . import install

    if args.name:
        path = install.set_default(args.name)
        print(f"the default model is now {args.name} ({path})")
    else:
        print(resolve_model(None))
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    from .archive import pack

    out = pack(_resolve(args.name), Path(args.file), force=args.force)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB); on the other machine: edge-translator models add {out.name}")
    return 0
