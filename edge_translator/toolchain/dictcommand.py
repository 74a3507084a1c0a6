"""The dictionary's toolchain subcommands: ``build-dictionary`` and ``eval-dictionary``.

Argument parsing and printing only; :mod:`.dictbuild` and :mod:`.dicteval` do the work when a
command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import InputError


def add_parsers(sub) -> None:
    """Declare the dictionary's subcommands.

    Args:
        sub: The ``edge-translator`` parser's subparsers action.
    """
    bd = sub.add_parser("build-dictionary", help="build the English→Chinese dictionary for words and short terms "
                        "from CC-CEDICT, wordfreq and lemminflect (extra 'dictionary')")
    bd.add_argument("out", help="folder to write, e.g. edge_translator/dictionaries/en-zh")
    bd.add_argument("--force", action="store_true", help="replace OUT if it exists")
    bd.add_argument("--software", metavar="FILE", default="work/software/software.tsv",
                    help="the software catalogs' training rows from harvest-software (default "
                    "work/software/software.tsv; the held-out packages' files are never read)")
    bd.add_argument("--software-terms", metavar="FILE", help="the training packages' strings of 1-3 words from "
                    "harvest-software (work/software/software-terms.tsv: also those a held-out package has, from the "
                    "training packages only), for the interface terms; without it they come from --software alone")
    bd.set_defaults(func=cmd_build_dictionary)

    ed = sub.add_parser("eval-dictionary", help="score the dictionary on the word and term samples "
                        "(assets/eval/dict-*.tsv), or draw those samples again")
    ed.add_argument("--dictionary", metavar="DIR", help="dictionary folder (default: the packaged one)")
    ed.add_argument("--words", metavar="FILE", default="assets/eval/dict-words.tsv",
                    help="word sample (default assets/eval/dict-words.tsv)")
    ed.add_argument("--terms", metavar="FILE", default="assets/eval/dict-terms.tsv",
                    help="term sample (default assets/eval/dict-terms.tsv)")
    ed.add_argument("--misses", type=int, default=0, metavar="N", help="also list the first N misses of each")
    ed.add_argument("--json", metavar="FILE", help="also write the scores and every miss as JSON")
    ed.add_argument("--draw-samples", metavar="DIR", help="draw the samples into DIR instead (extra 'dictionary'; "
                    "needs --software)")
    ed.add_argument("--software", nargs="+", metavar="TSV", help="the held-out software packages' pairs (origin, "
                    "zh_hans, zh_hant, en: software-test.tsv, software-dev.tsv), for --draw-samples")
    ed.add_argument("--everyday", metavar="FILE", default="assets/eval/dict-everyday.tsv",
                    help="hand-written everyday compounds, for --draw-samples (default assets/eval/dict-everyday.tsv)")
    ed.add_argument("--model", nargs="?", const="", metavar="MODEL", help="also score the samples as translate() "
                    "answers them (the dictionary's best headword, else the model's translation), with MODEL (a bundle "
                    "folder or installed name; without one, the default model), its translation memory off")
    ed.add_argument("--agreement", metavar="FILE", help="also measure how often the training packages of "
                    "software-terms.tsv agree on a string's Chinese: the exact-match ceiling of the software rows")
    ed.set_defaults(func=cmd_eval_dictionary)


def cmd_build_dictionary(args: argparse.Namespace) -> int:
    """Build the dictionary folder (see toolchain.dictbuild)."""
    from .dictbuild import DATA_FILE, build_dictionary

    manifest = build_dictionary(Path(args.out), force=args.force, software=Path(args.software),
                                terms=Path(args.software_terms) if args.software_terms else None)
    size = manifest["files"][DATA_FILE]["size"]
    counts = ", ".join(f"{value} {key}" for key, value in manifest["counts"].items() if isinstance(value, int))
    print(f"{args.out}: {counts}; {DATA_FILE} {size / 1e6:.2f} MB ({manifest['source']}, {manifest['licence']})")
    return 0


def cmd_eval_dictionary(args: argparse.Namespace) -> int:
    """Score the dictionary on its samples, or draw the samples (see toolchain.dicteval)."""
    import json

    from ..core.dictionary import Dictionary
    from . import dicteval

    if args.draw_samples:
        if not args.software:
            raise InputError("--draw-samples needs --software with the software catalogs' pairs TSV files")
        written = dicteval.make_samples(Path(args.draw_samples), [Path(p) for p in args.software], Path(args.everyday))
        print(", ".join(f"{name}: {rows} rows" for name, rows in written.items()))
        return 0
    dictionary = Dictionary.load(args.dictionary)
    answer = dicteval.dictionary_answer(dictionary)
    results = {}
    for name, path in (("words", args.words), ("terms", args.terms)):
        if not Path(path).is_file():
            raise InputError(f"{path} does not exist; pass --{name} FILE (a sample written by --draw-samples)")
        result = dicteval.score(answer, dicteval.read_sample(Path(path)), dicteval.dictionary_primary(dictionary))
        results[name] = result
        origins = ", ".join(f"{k} {v:.1%}" for k, v in result["by_origin"].items())
        print(f"{name}: {result['accuracy']:.1%} right ({result['right']}/{result['rows']}; {origins}), "
              f"coverage {result['coverage']:.1%}, precision {result['precision']:.1%}, top-3 {result['top3']:.1%}, "
              f"main sense {result['main_accuracy']:.1%} of {result['main_rows']}, "
              f"looser {result['loose_accuracy']:.1%}")
        for english, got, accepted in result["misses"][: args.misses]:
            print(f"  {english}: {got or '(none)'}  [{accepted}]")
    if args.model is not None:
        from ..core.translator import TranslateOptions, Translator

        translator = Translator.load(args.model or None, cache=None)
        for name, path in (("words", args.words), ("terms", args.terms)):
            rows = dicteval.read_sample(Path(path))
            got = translator.translate_batch([row.english for row in rows], TranslateOptions(dictionary=False))
            results[name]["with_model"] = m = dicteval.with_model(answer, rows, got)
            origins = ", ".join(f"{k} {v:.1%}" for k, v in m["by_origin"].items())
            print(f"{name}, as translate() answers: {m['product']:.1%} ({origins}); the model alone {m['model']:.1%}, "
                  f"the dictionary or the model right {m['either']:.1%}")
    if args.agreement:
        results["agreement"] = a = dicteval.package_agreement(Path(args.agreement), dicteval.read_sample(
            Path(args.terms)), answer)
        print(f"agreement: a package's Chinese is the other training packages' commonest for {a['agree']}/"
              f"{a['strings']} strings of 2-3 words; software rows a training package has: {a['seen']}/{a['rows']}, "
              f"its packages' commonest is the held-out one's for {a['majority']}, the dictionary right for "
              f"{a['right_seen']} (and {a['right_unseen']} of the rest)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0
