#!/usr/bin/env bash
# Build the one-file apps edge-translator and edge-translator-gui with PyInstaller.
#
# Usage: build/build.sh [VENV]
#   VENV     the build venv (argument, else $VENV, else WORK/venv). Made on the first run:
#            build/requirements.txt (PyInstaller and the apps' dependencies, pinned) and numpy;
#            remade when those inputs change. This checkout goes in (--no-deps) on every run.
#   DIST     where the apps go (default dist/ of this checkout)
#   WORK     PyInstaller's work folder, the venv and numpy's wheel (default work/build/)
#   TARGETS  which apps (default "edge-translator edge-translator-gui")
#   ONEDIR=1 builds one-folder apps instead (DIST/NAME/NAME).
#   NUMPY_BLAS=none (default) builds numpy from source without BLAS or LAPACK: the runtime
#            never multiplies matrices in numpy (ONNX Runtime does), and OpenBLAS with its
#            gfortran is 8.5 MB of the compressed CLI. Needs a C/C++ compiler and Python's
#            headers; takes a few minutes, once per WORK. NUMPY_BLAS=wheel takes PyPI's wheel.
#   PYTHON   the interpreter that makes the venv (default python3)
#   PY       build with this interpreter as it is: no venv is made or changed
#   MAX_CLI_MB=50, MAX_GUI_MB=100: a one-file app over its limit fails the build (the CLI is
#            45.4 MB with the embedded model, plus 3.5 MB of the English→Chinese dictionary).
# Fails if torch, transformers, onnx or edge_translator.toolchain ends up in an app.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
DIST=${DIST:-$REPO/dist}
WORK=${WORK:-$REPO/work/build}
VENV=${1:-${VENV:-$WORK/venv}}
TARGETS=${TARGETS:-edge-translator edge-translator-gui}
NUMPY_BLAS=${NUMPY_BLAS:-none}
NUMPY_VERSION=2.4.6
log() { echo "build.sh: $*"; }

# --- the build venv --------------------------------------------------------------------------
# Its inputs: the pinned requirements, the numpy choice, and this checkout's pyproject.toml.
# PY=... (an interpreter that already has all of it, e.g. build/aarch64/build.sh's) skips it.
if [[ -z ${PY:-} ]]; then
    PY=$VENV/bin/python
    stamp=$(cat "$HERE/requirements.txt" "$REPO/pyproject.toml" <(echo "numpy $NUMPY_VERSION $NUMPY_BLAS") | sha256sum | cut -c1-16)
    if [[ $(cat "$VENV/.edge-translator-build" 2>/dev/null) != "$stamp" ]]; then
        log "making the build venv $VENV"
        rm -rf "$VENV"
        "${PYTHON:-python3}" -m venv "$VENV"
        "$PY" -m pip install -q --upgrade pip
        numpy_spec="numpy==$NUMPY_VERSION"
        if [[ $NUMPY_BLAS == none ]]; then
            wheels=$WORK/numpy-noblas-$NUMPY_VERSION
            if ! compgen -G "$wheels/numpy-$NUMPY_VERSION-*.whl" >/dev/null; then
                log "building numpy $NUMPY_VERSION from source without BLAS (a few minutes, once)"
                rm -rf "$wheels" && mkdir -p "$wheels"
                # --no-cache-dir: pip's wheel cache does not tell builds with other options apart
                "$PY" -m pip wheel -q --no-cache-dir --no-deps --no-binary numpy -w "$wheels" "$numpy_spec" \
                    -Csetup-args=-Dblas=none -Csetup-args=-Dlapack=none >"$WORK/numpy-build.log" 2>&1 || {
                    tail -20 "$WORK/numpy-build.log" >&2; rm -rf "$wheels"
                    log "building numpy failed (log: $WORK/numpy-build.log); NUMPY_BLAS=wheel takes PyPI's wheel"; exit 1; }
            fi
            numpy_spec=$(ls "$wheels"/numpy-"$NUMPY_VERSION"-*.whl)
        fi
        # numpy in the same resolve as the rest, so onnxruntime's dependency on it takes this one
        "$PY" -m pip install -q -r "$HERE/requirements.txt" "$numpy_spec"
        "$PY" -c 'import sys, numpy
blas = numpy.show_config(mode="dicts")["Build Dependencies"]["blas"]
sys.exit((blas.get("found") is True) != (sys.argv[1] != "none"))' "$NUMPY_BLAS" \
            || { log "numpy in $VENV is not the one asked for (NUMPY_BLAS=$NUMPY_BLAS)"; exit 1; }
        echo "$stamp" >"$VENV/.edge-translator-build"
    fi
    # this checkout, as it is now, every time
    "$PY" -m pip install -q --no-deps --force-reinstall "$REPO" 2>&1 | { grep -v '^WARNING: Location' || true; } >&2
fi
if ! "$PY" -m PyInstaller --version >/dev/null 2>&1; then
    log "no PyInstaller for $PY: remove $VENV and run again (or install it into the PY given)"
    exit 2
fi

# Size limits of the one-file apps, in MB (10^6 bytes); 0 turns a check off.
declare -A LIMITS_MB=([edge-translator]=${MAX_CLI_MB:-50} [edge-translator-gui]=${MAX_GUI_MB:-100})

# Module names (dotted, in the PYZ) or file paths (slashed) of what must stay out.
FORBIDDEN='^(torch|transformers|onnx|ray|pyarrow|edge_translator[./](toolchain|bench))([./]|$)|^libtorch|^libarrow'

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
    limit=${LIMITS_MB[$target]:-0}
    log "$app: $(awk -v b="$size" 'BEGIN {printf "%.1f", b / 1e6}') MB ($size bytes)$([[ ${ONEDIR:-} != 1 && $limit != 0 ]] && echo ", limit $limit MB")"
    if [[ ${ONEDIR:-} != 1 && $limit != 0 ]] && (( size > limit * 1000000 )); then
        log "FAIL: $app is over its size limit of $limit MB (MAX_CLI_MB / MAX_GUI_MB)"
        exit 1
    fi
done
