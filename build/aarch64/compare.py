"""Compare greedy ids written by ids.py on x86 with those written under emulation.

    python3 compare.py HOST.json GUEST.json

Prints one line per bundle, ``NAME batch1 M/N batched M/N``, then one ``warnings`` line
per bundle that logged any. Exits 0 (the counts are reported, not enforced) unless the
files do not hold the same sentences and bundles.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8") as fh:
        host = json.load(fh)
    with open(argv[1], encoding="utf-8") as fh:
        guest = json.load(fh)
    if host["sentences"] != guest["sentences"] or set(host["bundles"]) != set(guest["bundles"]):
        print("the two files hold different sentences or bundles")
        return 2
    total = len(host["sentences"])
    for name, want in host["bundles"].items():
        got = guest["bundles"][name]
        counts = []
        for mode in ("batch1", "batched"):
            same = sum(a == b for a, b in zip(want[mode], got[mode]))
            counts.append(f"{mode} {same}/{total}")
        invariant = sum(a == b for a, b in zip(got["batch1"], got["batched"]))
        print(f"{name} {' '.join(counts)} (guest batch1 vs batched {invariant}/{total})")
    for name, got in guest["bundles"].items():
        for line in got["warnings"]:
            print(f"warning {name}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
