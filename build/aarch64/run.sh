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
ROOT=$WORK/root
DEBS=$WORK/debs
WHEELS=$WORK/wheels
CPUS=${CPUS:-"cortex-a72 cortex-a76"}
HOSTPY=${HOSTPY:-$REPO/.venv/bin/python}
EXPORT=${EXPORT:-$REPO/.venv/bin/edge-translator}

ORT_VERSION=1.32.0
PINS=(numpy==2.4.6 "onnxruntime==$ORT_VERSION" sentencepiece==0.2.3
      pytest==9.2.0 iniconfig==2.3.1 packaging==26.4 pluggy==1.7.0 pygments==2.21.0
      hypothesis==6.170.17 sortedcontainers==2.4.0)

# The core's tests that import only the core, numpy, onnxruntime, sentencepiece, pytest
# (and hypothesis, a pure-Python test library, for test_text.py). test_engine.py also
# imports edge_translator.toolchain.testmodels (stdlib + core.errors only) and tests/ties.py
# (numpy at module level; torch only inside a function the selected tests do not call).
TESTS=(tests/test_text.py tests/test_bundle.py tests/test_translator.py tests/test_engine.py
       tests/test_dependency_wall.py)

mkdir -p "$WORK" "$DEBS" "$WHEELS" "$WORK/logs"
export PYTHONPYCACHEPREFIX=$WORK/pycache-host  # host-side Python writes no bytecode into the tree
log() { printf '[%4ds] %s\n' $((SECONDS - START)) "$*"; }
die() { log "FAILED: $*"; exit 1; }

# --- 1. qemu-user-static (Debian's) ------------------------------------------------------
apt_updated=0
apt_update() { [ $apt_updated = 1 ] || { log "apt-get update"; apt-get update -qq >"$WORK/logs/apt-update.log" 2>&1; apt_updated=1; }; }
if ! command -v qemu-aarch64-static >/dev/null; then
    [ "$(id -u)" = 0 ] || die "qemu-user-static is missing and this is not root"
    log "installing qemu-user-static"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static >"$WORK/logs/apt-qemu.log" 2>&1 \
        || { apt_update; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static >"$WORK/logs/apt-qemu.log" 2>&1; } \
        || die "apt-get install qemu-user-static (see $WORK/logs/apt-qemu.log)"
fi
QEMU=$(command -v qemu-aarch64-static)
QEMU_VERSION=$("$QEMU" --version | head -1)
log "$QEMU_VERSION"

# --- 2. Debian's arm64 Python, unpacked into ROOT -------------------------------------
PYV=$(apt-cache policy python3 | awk '/Candidate:/ {print $2}' | sed -E 's/^([0-9]+\.[0-9]+).*/\1/')
[[ $PYV =~ ^3\.[0-9]+$ ]] || die "cannot tell Debian's python3 version (apt-cache policy python3: '$PYV')"
# The closure, checked by closure.py below: python$PYV's Depends, the libraries its
# extension modules link (nis -> libnsl2/libtirpc3 -> Kerberos; _dbm -> libdb5.3), and
# libstdc++6/libgcc-s1 for onnxruntime and sentencepiece. numpy's OpenBLAS/gfortran and
# sentencepiece's libgomp come inside the wheels. Names are bookworm's.
PKGS=(python$PYV-minimal libpython$PYV-minimal libpython$PYV-stdlib python$PYV
      libc6 libgcc-s1 libstdc++6 libexpat1 zlib1g libffi8 libssl3 libbz2-1.0 liblzma5
      libsqlite3-0 libuuid1 libncursesw6 libtinfo6 libreadline8 libcrypt1 libdb5.3
      libnsl2 libtirpc3 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1)
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    log "dpkg --add-architecture arm64"
    dpkg --add-architecture arm64
    apt_updated=0; apt_update
fi
missing=()
for p in "${PKGS[@]}"; do
    compgen -G "$DEBS/${p}_*_arm64.deb" >/dev/null || missing+=("$p:arm64")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get download ${#missing[@]} arm64 packages"
    (cd "$DEBS" && apt-get download "${missing[@]}" >"$WORK/logs/apt-download.log" 2>&1) \
        || { apt_update; (cd "$DEBS" && apt-get download "${missing[@]}" >"$WORK/logs/apt-download.log" 2>&1); } \
        || die "apt-get download (see $WORK/logs/apt-download.log)"
fi
debs=()
for p in "${PKGS[@]}"; do debs+=("$(ls "$DEBS/${p}"_*_arm64.deb | sort -V | tail -1)"); done
stamp=$(printf '%s\n' "${debs[@]##*/}" | sha256sum | cut -c1-16)
if [ "$(cat "$ROOT/.stamp" 2>/dev/null)" != "$stamp" ]; then
    log "unpacking ${#debs[@]} packages into $ROOT"
    rm -rf "$ROOT"; mkdir -p "$ROOT"
    for d in "${debs[@]}"; do dpkg -x "$d" "$ROOT"; done
    echo "$stamp" >"$ROOT/.stamp"
fi
# qemu -L falls back to the host for paths the root lacks: shadow the host's x86
# dist-packages (and the .pth files in them) with empty folders.
mkdir -p "$ROOT/usr/lib/python3/dist-packages" "$ROOT/usr/local/lib/python$PYV/dist-packages"
rm -rf "$ROOT/proc"
GUEST_PY=$ROOT/usr/bin/python$PYV
[ -x "$GUEST_PY" ] || die "$GUEST_PY missing after unpacking"
log "Debian arm64 python$PYV: $(basename "$(ls "$DEBS"/python$PYV-minimal_*_arm64.deb | tail -1)")"

# --- 3. aarch64 wheels into SITE --------------------------------------------------------
PLAT=(--platform manylinux2014_aarch64 --platform manylinux_2_17_aarch64 --platform manylinux_2_27_aarch64
      --platform manylinux_2_28_aarch64 --only-binary=:all: --python-version "$PYV" --implementation cp)
wheels=()
for pin in "${PINS[@]}"; do
    name=${pin%%==*}; version=${pin#*==}
    pattern="$WHEELS/${name}-${version}-*.whl"
    if ! compgen -G "$pattern" >/dev/null; then
        log "pip download $pin"
        "$HOSTPY" -m pip download -q --no-deps -d "$WHEELS" "${PLAT[@]}" "$pin" >>"$WORK/logs/pip.log" 2>&1 \
            || die "pip download $pin (see $WORK/logs/pip.log)"
    fi
    wheels+=("$(ls $pattern | head -1)")
done
SITE=$WORK/site-py$PYV-ort$ORT_VERSION
stamp=$(printf '%s\n' "${wheels[@]##*/}" | sha256sum | cut -c1-16)
if [ "$(cat "$SITE/.stamp" 2>/dev/null)" != "$stamp" ]; then
    log "installing ${#wheels[@]} wheels into $SITE"
    rm -rf "$SITE"
    "$HOSTPY" -m pip install -q --no-deps --no-index --target "$SITE" "${PLAT[@]}" "${wheels[@]}" \
        >>"$WORK/logs/pip.log" 2>&1 || die "pip install --target (see $WORK/logs/pip.log)"
    echo "$stamp" >"$SITE/.stamp"
fi
python3 "$HERE/closure.py" "$ROOT" "$SITE" >"$WORK/logs/closure.log" || { cat "$WORK/logs/closure.log"; die "library closure"; }
log "$(tail -1 "$WORK/logs/closure.log")"

# Everything the emulated Python runs gets this environment (host commands do not);
# PYTHONPYCACHEPREFIX keeps its bytecode out of the source tree (and makes reruns faster).
GUEST_ENV=(env PYTHONPATH="$SITE:$REPO" PYTHONNOUSERSITE=1 PYTHONPYCACHEPREFIX="$WORK/pycache" PYTHONUTF8=1
           HYPOTHESIS_STORAGE_DIRECTORY="$WORK/hypothesis")
unset EDGE_TRANSLATOR_MODEL QEMU_LD_PREFIX QEMU_CPU

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

# --- fake Raspberry Pi /proc/cpuinfo, one qemu -L prefix per CPU model --------------------
NPROC=$(getconf _NPROCESSORS_CONF)
cpuinfo() {  # MODEL -> text of a Pi-style aarch64 /proc/cpuinfo with $NPROC processors
    local features part board
    case $1 in
        cortex-a72) features="fp asimd evtstrm crc32 cpuid"; part=0xd08; board="Raspberry Pi 4 Model B Rev 1.5";;
        cortex-a76) features="fp asimd evtstrm crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp"
                    part=0xd0b; board="Raspberry Pi 5 Model B Rev 1.0";;
        *) features="fp asimd evtstrm crc32 cpuid"; part=0xd08; board="aarch64 ($1)";;
    esac
    for ((i = 0; i < NPROC; i++)); do
        printf 'processor\t: %d\nBogoMIPS\t: 108.00\nFeatures\t: %s\nCPU implementer\t: 0x41\n' $i "$features"
        printf 'CPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: %s\nCPU revision\t: 1\n\n' $part
    done
    printf 'Model\t\t: %s\n' "$board"
}
prefix_for() {  # MODEL -> a qemu -L dir: symlinks to ROOT plus proc/cpuinfo; and a wrapper
    local cpu=$1 dir=$WORK/cpu/$1 d
    mkdir -p "$dir/proc" "$WORK/bin"
    for d in usr lib etc; do ln -sfn "$ROOT/$d" "$dir/$d"; done
    cpuinfo "$cpu" >"$dir/proc/cpuinfo"
    # sys.executable is this wrapper (qemu -0 sets argv[0]), so tests that start
    # `sys.executable -m edge_translator.cli` re-enter qemu with the same CPU and prefix
    # (no binfmt_misc registration needed).
    cat >"$WORK/bin/python-$cpu" <<EOF
#!/bin/sh
exec ${GUEST_ENV[@]@Q} QEMU_CPU=$cpu "$QEMU" -L "$dir" -0 "\$0" "$GUEST_PY" "\$@"
EOF
    chmod +x "$WORK/bin/python-$cpu"
}

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
