#!/usr/bin/env bash
# Build the one-file apps edge-translator and edge-translator-gui with PyInstaller.
#
# Usage: build/build.sh [VENV]
#   VENV     the virtual environment to build from (argument, else $VENV, else .venv); it needs
#            pyinstaller and edge-translator[serve,docs,gui], and should not hold the export extra.
#   DIST     where the apps go (default /tmp/edge-translator/dist)
#   WORK     PyInstaller's work folder (default /tmp/edge-translator/work)
#   TARGETS  which apps (default "edge-translator edge-translator-gui")
#   ONEDIR=1 builds one-folder apps instead (DIST/NAME/NAME).
# Fails if torch, transformers, onnx or edge_translator.toolchain ends up in an app.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${1:-${VENV:-$HERE/../.venv}}
DIST=${DIST:-/tmp/edge-translator/dist}
WORK=${WORK:-/tmp/edge-translator/work}
TARGETS=${TARGETS:-edge-translator edge-translator-gui}
PY=$VENV/bin/python

if ! "$PY" -m PyInstaller --version >/dev/null 2>&1; then
    echo "build.sh: no PyInstaller in $VENV: run $VENV/bin/pip install pyinstaller" >&2
    exit 2
fi

# Module names (dotted, in the PYZ) or file paths (slashed) of what must stay out.
FORBIDDEN='^(torch|transformers|onnx|edge_translator[./]toolchain)([./]|$)|^libtorch'

check() {  # check APP: list every archive inside APP and fail on a forbidden entry
    local app=$1 listing found
    listing=$("$PY" -m PyInstaller.utils.cliutils.archive_viewer -r -b "$app") || {
        echo "build.sh: cannot list $app" >&2; return 1; }
    found=$(sed 's/^ *//' <<<"$listing" | grep -E "$FORBIDDEN" || true)
    if [[ -n $found ]]; then
        echo "build.sh: FAIL: $app holds what it must not:" >&2
        head -20 <<<"$found" >&2
        return 1
    fi
    echo "build.sh: $app: $(wc -l <<<"$listing") entries, none forbidden"
}

for target in $TARGETS; do
    "$PY" -m PyInstaller --noconfirm --log-level "${LOG_LEVEL:-ERROR}" \
        --distpath "$DIST" --workpath "$WORK" "$HERE/$target.spec"
    if [[ ${ONEDIR:-} == 1 ]]; then
        app=$DIST/$target/$target
        # the onedir executable only holds the PYZ; its libraries lie beside it
        if find "$DIST/$target" -regextype posix-extended -path '*/_internal/*' \
            | sed "s|^$DIST/$target/_internal/||" | grep -E "$FORBIDDEN"; then
            echo "build.sh: FAIL: $DIST/$target holds what it must not" >&2
            exit 1
        fi
    else
        app=$DIST/$target
    fi
    check "$app"
    size=$(du -sb "${app%/$target}" 2>/dev/null | cut -f1)
    [[ ${ONEDIR:-} == 1 ]] || size=$(stat -c %s "$app")
    echo "build.sh: $app: $((size / 1000000)) MB ($size bytes)"
done
