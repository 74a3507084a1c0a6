#!/usr/bin/env bash
# Prove the edge-translator runtime core on aarch64 under qemu user emulation, for a
# Raspberry Pi 4 (QEMU_CPU=cortex-a72: no dot-product, no `asimddp`) and a Raspberry Pi 5
# (QEMU_CPU=cortex-a76: dot-product, `asimddp`). See build/aarch64/README.md.
#
#   bash build/aarch64/run.sh            # needs root (apt) and the package registries
#
# Environment knobs: CPUS="cortex-a72 cortex-a76" (models to run), WORK=... (downloads and
# scratch; default work/aarch64, git-ignored), REEXPORT=1 (export the int8r/q8/q4 bundles again),
# PARITY_STRICT=1 (fail when an int8r/q8/q4 sentence differs from x86), PROBE=0 (skip the probes).
#
# Pinned: onnxruntime 1.32.0, the newest release and the one the x86 venv runs (so the
# parity check compares like with like). It is >= 1.23, which 8-bit MatMulNBits on ARM64
# needs. The "1.32 crashes at import under Debian's qemu 7.2" report is real, but it is not
# the CPU model: every onnxruntime from 1.28.0 on segfaults at import under qemu 7.2 with
# QEMU_CPU unset, cortex-a72, cortex-a76 and max alike (1.26.0 and 1.27.0 import). qemu 7.2
# linux-user hands the guest the HOST's x86 /proc/cpuinfo; onnxruntime's CPU detection at
# import (pytorch/cpuinfo: /proc/cpuinfo, then /sys topology) then takes SIGSEGV at address
# 0 (1.27 and older only print "Unknown CPU vendor").
# A real Pi has a real /proc/cpuinfo, so this is an emulation artefact. The fix used here:
# qemu's -L prefix is searched first for every absolute path the guest opens, /proc/cpuinfo
# included, so each CPU model gets a prefix dir holding a Pi 4 / Pi 5 style proc/cpuinfo
# (symlinks to the shared root for the rest). With it, 1.27.0, 1.28.0, 1.31.1 and 1.32.0 import
# and run. The probe step below re-checks the crash each run (informational).
set -euo pipefail
START=$SECONDS

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=${WORK:-$REPO/work/aarch64}
CPUS=${CPUS:-"cortex-a72 cortex-a76"}
HOSTPY=${HOSTPY:-$REPO/.venv/bin/python}
EXPORT=${EXPORT:-$REPO/.venv/bin/edge-translator}

ORT_VERSION=1.32.0
PINS=(numpy==2.4.6 "onnxruntime==$ORT_VERSION" sentencepiece==0.2.3
      pytest==9.2.0 iniconfig==2.3.1 packaging==26.4 pluggy==1.7.0 pygments==2.21.0
      hypothesis==6.170.17 sortedcontainers==2.4.0
      # the "convert" extra, which converts a model on the board without PyTorch (step b2)
      onnx==1.23.2 protobuf==7.36.2 ml_dtypes==0.7.0 typing_extensions==4.16.0 pyyaml==6.0.4)

# The core's tests that import only the core, numpy, onnxruntime, sentencepiece, pytest
# (and hypothesis, a pure-Python test library, for test_text.py). test_engine.py also
# imports edge_translator.toolchain.testmodels (stdlib + core.errors only) and tests/ties.py
# (numpy at module level; torch only inside a function the selected tests do not call).
TESTS=(tests/test_text.py tests/test_bundle.py tests/test_translator.py tests/test_engine.py
       tests/test_dependency_wall.py)

STATE=$WORK LOGS=$WORK/logs SITE_PREFIX=site WITH_LIBPYTHON=0
# 1-3: qemu-user-static, Debian's arm64 Python in $ROOT, the wheels in $SITE; GUEST_ENV,
# and cpuinfo/prefix_for for the fake /proc/cpuinfo below (shared with build.sh)
source "$HERE/setup.sh"

# --- probes (informational): what does the guest see as /proc/cpuinfo? -----------------
if [ "${PROBE:-1}" = 1 ]; then
    seen=$("${GUEST_ENV[@]}" QEMU_CPU=cortex-a76 "$QEMU" -L "$ROOT" "$GUEST_PY" -c "
import re; t = open('/proc/cpuinfo').read()
m = re.search(r'^(flags|Features)\s*:(.*)$', t, re.M)
print(m.group(1), 'asimddp' in t, 'avx2' in t)" 2>&1 || true)
    log "probe: guest /proc/cpuinfo under qemu (no fake): key,asimddp,avx2 = $seen"
    # (the echo keeps the subshell from exec'ing, so the shell's "Segmentation fault" goes to the log)
    ("${GUEST_ENV[@]}" QEMU_CPU=cortex-a76 timeout 120 "$QEMU" -L "$ROOT" "$GUEST_PY" -c "import onnxruntime"
     echo "exit=$?") >"$WORK/logs/probe-ort.log" 2>&1 || true
    rc=$(sed -n 's/^exit=//p' "$WORK/logs/probe-ort.log")
    log "probe: import onnxruntime $ORT_VERSION with the host's /proc/cpuinfo: rc=$rc$([ $rc = 139 ] && echo ' (segfault, as expected without the fake cpuinfo)')"
fi

# --- host side: bundles and x86 reference ids -------------------------------------------
for q in int8r q8 q4; do
    if [ "${REEXPORT:-0}" = 1 ] || [ ! -f "$WORK/tiny-$q/bundle.json" ]; then
        log "exporting tests/fixtures/tiny-marian as $q on the host"
        "$EXPORT" export "$REPO/tests/fixtures/tiny-marian" "$WORK/tiny-$q" --quantize $q --block-size 16 --force \
            >"$WORK/logs/export-$q.log" 2>&1 || die "export $q (see $WORK/logs/export-$q.log)"
    fi
done
BUNDLES=(int8="$REPO/tests/fixtures/tiny-int8" int8r="$WORK/tiny-int8r" q8="$WORK/tiny-q8" q4="$WORK/tiny-q4")
HOST_ORT=$("$HOSTPY" -c 'import onnxruntime; print(onnxruntime.__version__)')
[ "$HOST_ORT" = "$ORT_VERSION" ] || log "note: the x86 venv has onnxruntime $HOST_ORT, the guest $ORT_VERSION"
(cd "$REPO" && env -u EDGE_TRANSLATOR_CPUINFO PYTHONPATH="$REPO" "$HOSTPY" "$HERE/ids.py" "$WORK/ids-x86_64.json" "${BUNDLES[@]}") \
    >"$WORK/logs/ids-x86_64.log" 2>&1 || { cat "$WORK/logs/ids-x86_64.log"; die "host ids"; }
log "x86 reference ids written (onnxruntime $HOST_ORT)"

# --- fake Raspberry Pi /proc/cpuinfo: setup.sh's prefix_for MODEL makes $WORK/cpu/MODEL
# (a qemu -L prefix: symlinks to ROOT plus a Pi-style proc/cpuinfo) and $WORK/bin/python-MODEL.

# --- per CPU model: tests, CLI, parity, warning -----------------------------------------
FAIL=0
SUMMARY=()
for cpu in $CPUS; do
    t0=$SECONDS
    prefix_for "$cpu"
    PY=$WORK/bin/python-$cpu
    export EDGE_TRANSLATOR_CPUINFO=$WORK/cpu/$cpu/proc/cpuinfo
    log "== $cpu: $("$PY" -c 'import platform, onnxruntime, numpy; print(platform.machine(), "onnxruntime", onnxruntime.__version__, "numpy", numpy.__version__)' 2>&1 | tail -1)"
    status=()

    # a. the core's tests
    rm -rf "$WORK/tmp/pytest-$cpu"; mkdir -p "$WORK/tmp"
    set +e
    (cd "$REPO" && "$PY" -m pytest -q -p no:cacheprovider --basetemp "$WORK/tmp/pytest-$cpu" \
        "${TESTS[@]}") >"$WORK/logs/pytest-$cpu.log" 2>&1
    rc=$?; set -e
    counts=$(grep -E '^(=+ )?[0-9]+ (passed|failed|error)' "$WORK/logs/pytest-$cpu.log" | tail -1 | sed -E 's/=//g; s/^ +| +$//g')
    t_tests=$((SECONDS - t0))
    if [ $rc = 0 ]; then status+=("tests: $counts (${t_tests}s)"); else
        FAIL=1; status+=("tests FAILED rc=$rc: ${counts:-no summary} (see $WORK/logs/pytest-$cpu.log)"); fi
    log "$cpu tests: rc=$rc ${counts}"

    # b. the CLI on the embedded demo model
    t1=$SECONDS
    set +e
    out=$(cd "$REPO" && "$PY" -m edge_translator.cli translate "Hello. How are you today?" 2>"$WORK/logs/cli-$cpu.err")
    rc=$?; set -e
    if [ $rc = 0 ] && printf '%s' "$out" | python3 -c 'import sys; t = sys.stdin.read(); sys.exit(0 if any("\u4e00" <= c <= "\u9fff" for c in t) else 1)'; then
        status+=("cli: ok ($((SECONDS - t1))s): $out")
    else
        FAIL=1; status+=("cli FAILED rc=$rc: '$out' (see $WORK/logs/cli-$cpu.err)")
    fi
    log "$cpu cli: rc=$rc $out"

    # b2. a model converted on the board itself (the convert extra: no PyTorch), then used:
    # the tiny Hugging Face fixture into an int8r bundle, whose weights must be the x86
    # export's byte for byte, and a translation with it
    t1=$SECONDS
    set +e
    (cd "$REPO" && "$PY" -m edge_translator.cli export tests/fixtures/tiny-marian "$WORK/tiny-conv-$cpu" --force) \
        >"$WORK/logs/convert-$cpu.log" 2>&1
    rc=$?
    conv=$(cd "$REPO" && "$PY" -m edge_translator.cli translate --model "$WORK/tiny-conv-$cpu" "Hello world." \
        2>>"$WORK/logs/convert-$cpu.log")
    rc2=$?; set -e
    same=$(python3 -c 'import json, sys; a, b = (json.load(open(p + "/bundle.json"))["files"] for p in sys.argv[1:]); print("identical" if all(a[k]["sha256"] == b[k]["sha256"] for k in ("weights.bin", "encoder.onnx", "decoder.onnx")) else "DIFFERENT")' "$WORK/tiny-conv-$cpu" "$WORK/tiny-int8r" 2>&1 || true)
    if [ $rc = 0 ] && [ $rc2 = 0 ] && [ -n "$conv" ] && [ "$same" = identical ]; then
        status+=("convert on $cpu: ok ($((SECONDS - t1))s), graphs and weights identical to the x86 export; translated: $conv")
    else
        FAIL=1; status+=("convert on $cpu FAILED rc=$rc/$rc2, files $same (see $WORK/logs/convert-$cpu.log)")
    fi
    log "$cpu convert: rc=$rc/$rc2 $same"

    # c. block-quantized parity with x86, and the slow-path warning
    t1=$SECONDS
    if (cd "$REPO" && "$PY" "$HERE/ids.py" "$WORK/ids-$cpu.json" "${BUNDLES[@]}") >"$WORK/logs/ids-$cpu.log" 2>&1; then
        python3 "$HERE/compare.py" "$WORK/ids-x86_64.json" "$WORK/ids-$cpu.json" >"$WORK/logs/parity-$cpu.txt"
        while read -r line; do status+=("parity vs x86: $line"); done < <(grep -v '^warning' "$WORK/logs/parity-$cpu.txt")
        if [ "${PARITY_STRICT:-0}" = 1 ] && grep -E '^(int8r|q8|q4) ' "$WORK/logs/parity-$cpu.txt" | grep -vqE 'batch1 ([0-9]+)/\1 batched ([0-9]+)/\2 '; then
            FAIL=1; status+=("parity FAILED (PARITY_STRICT=1): an int8r/q8/q4 sentence differs from x86")
        fi
        # Where ids differ: how close was the decision, scored on x86 and under emulation?
        if grep -vqE '^warning|batch1 ([0-9]+)/\1 batched ([0-9]+)/\2 ' "$WORK/logs/parity-$cpu.txt"; then
            (cd "$REPO" && env -u EDGE_TRANSLATOR_CPUINFO PYTHONPATH="$REPO" "$HOSTPY" "$HERE/gaps.py" \
                "$WORK/ids-x86_64.json" "$WORK/ids-$cpu.json" "${BUNDLES[@]}") >"$WORK/logs/gaps-$cpu.txt" 2>&1 \
                && (cd "$REPO" && "$PY" "$HERE/gaps.py" "$WORK/ids-x86_64.json" "$WORK/ids-$cpu.json" "${BUNDLES[@]}") \
                    2>/dev/null | sed 's/^/aarch64 view: /' >>"$WORK/logs/gaps-$cpu.txt" \
                || { FAIL=1; status+=("gaps FAILED (see $WORK/logs/gaps-$cpu.txt)"); }
            while read -r line; do status+=("  $line"); done < <(sed 's/^\([a-z0-9]*:\)/x86 view: \1/' "$WORK/logs/gaps-$cpu.txt" | grep -v ': 0 differ')
        fi
        q8warn=$(grep -c '^warning q8: this q8 bundle needs an int8 dot-product CPU' "$WORK/logs/parity-$cpu.txt" || true)
        want=$(grep -q 'asimddp' "$EDGE_TRANSLATOR_CPUINFO" && echo 0 || echo 1)
        if [ "$q8warn" = "$want" ]; then
            status+=("q8 slow-path warning: $([ "$q8warn" = 1 ] && echo seen || echo absent), as expected")
        else
            FAIL=1; status+=("q8 slow-path warning FAILED: seen=$q8warn, expected $want")
        fi
        while read -r line; do status+=("  $line"); done < <(grep '^warning' "$WORK/logs/parity-$cpu.txt")
        status+=("ids: $((SECONDS - t1))s")
    else
        FAIL=1; status+=("ids FAILED (see $WORK/logs/ids-$cpu.log)")
    fi
    SUMMARY+=("--- $cpu ($((SECONDS - t0))s)" "${status[@]}")
done

echo
echo "===== aarch64 summary: $QEMU_VERSION, python$PYV (Debian arm64), onnxruntime $ORT_VERSION; host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), x86 onnxruntime $HOST_ORT"
printf '%s\n' "${SUMMARY[@]}"
echo "total: $((SECONDS - START))s, $([ $FAIL = 0 ] && echo 'all checks passed' || echo 'SOME CHECKS FAILED')"
exit $FAIL
