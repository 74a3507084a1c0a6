#!/usr/bin/env bash
# Build the aarch64 one-file `edge-translator` CLI (not the GUI) under qemu user emulation,
# with Debian bookworm's arm64 Python 3.11 (glibc 2.36, as on Raspberry Pi OS bookworm), the
# aarch64 PyInstaller wheel, build/edge-translator.spec and build/build.sh itself; then smoke
# it. PyInstaller cannot cross-compile, so the whole build runs in the emulated Python.
#
#   bash build/aarch64/build.sh    # root: apt-get (first run), binfmt_misc (smoke run)
#
# Knobs: CPU=cortex-a72 (QEMU_CPU of the build), SMOKE_CPUS="cortex-a72 cortex-a76" (the CPU
# models the built app is smoke-run under), DIST=work/aarch64/build/dist, WORK=work/aarch64
# (as run.sh; this script keeps its own root, site, prefixes and logs in WORK/build/ and
# shares the debs/ and wheels/ download caches), HOSTPY=.venv/bin/python (host pip, downloads
# only), ONEDIR=1 (a one-folder app: DIST/edge-translator/edge-translator), MAX_CLI_MB=50
# (build.sh's size limit; PyPI's numpy brings OpenBLAS), LOG_LEVEL=INFO (PyInstaller's, into
# WORK/build/logs/build.log), SMOKE=0 (no smoke run), BINFMT=0 (never register binfmt_misc).
# Uses build/build.sh's PY= (build with this interpreter, make no venv).
#
# Measured (2-core "Intel(R) Xeon(R) Processor" host, qemu 7.2.22, downloads cached): the
# PyInstaller build under cortex-a72 134-147 s, the smoke run 29-37 s per CPU model, the
# whole script 203-218 s; the app is 46.6 MB. See README.md "Building the aarch64 app".
set -euo pipefail
START=$SECONDS

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=${WORK:-$REPO/work/aarch64}
CPU=${CPU:-cortex-a72}
SMOKE_CPUS=${SMOKE_CPUS:-cortex-a72 cortex-a76}
HOSTPY=${HOSTPY:-$REPO/.venv/bin/python}
DIST=${DIST:-$WORK/build/dist}

# The versions of the x86 build venv: build/requirements.txt (PyInstaller, the runtime and
# the serve/docs extras; the GUI's PySide6/shiboken6 are dropped), build.sh's NUMPY_VERSION,
# and setuptools (PyInstaller needs it; this is the one `python3 -m venv` puts in the venv).
# numpy is PyPI's wheel, with OpenBLAS: build.sh's default NUMPY_BLAS=none compiles numpy from
# source, which is not done under emulation (see README.md).
ORT_VERSION=$(sed -nE 's/^onnxruntime==([^ ]+).*/\1/p' "$REPO/build/requirements.txt")
NUMPY_VERSION=$(sed -n 's/^NUMPY_VERSION=//p' "$REPO/build/build.sh")
[ -n "$ORT_VERSION" ] && [ -n "$NUMPY_VERSION" ] || { echo "no onnxruntime pin in build/requirements.txt or no NUMPY_VERSION in build/build.sh" >&2; exit 1; }
PINS=(setuptools==65.5.0 "numpy==$NUMPY_VERSION")
while read -r req; do  # name==version; wheel files spell the name with _ for - and .
    name=${req%%==*}
    case ${name,,} in pyside6*|shiboken6) continue;; esac
    PINS+=("${name//[-.]/_}==${req#*==}")
done < <(sed -E 's/#.*//; s/[[:space:]]+//g; /^$/d' "$REPO/build/requirements.txt")

# Its own root (run.sh's plus libpython3.11), so the two scripts never unpack each other's,
# and a site folder whose name holds "site-packages": the spec strips only libraries from
# outside site-packages (auditwheel-patched ones break when stripped).
STATE=$WORK/build LOGS=$WORK/build/logs SITE_PREFIX=site-packages WITH_LIBPYTHON=1
source "$HERE/setup.sh"
prefix_for "$CPU"  # STATE/cpu/CPU: the qemu -L root with a fake Pi /proc/cpuinfo (onnxruntime needs it)

# --- host tools PyInstaller calls, for aarch64 files ---------------------------------------
# The emulated Python runs host (x86) programs natively, and PyInstaller calls `ldd` (binary
# dependencies), `objdump -a` (binary or data?), `objcopy --add-section` (appends the archive
# to the one-file bootloader), `ldconfig -p` (fallback library lookup) and, in the spec, `strip`.
# The host's x86 binutils cannot write aarch64 files ("Unable to recognise the format"), the
# host's ldd cannot load them, and its ldconfig lists x86 libraries. So: Debian's cross
# binutils, and shims first on PATH that answer for the aarch64 root.
if ! command -v aarch64-linux-gnu-objcopy >/dev/null; then
    [ "$(id -u)" = 0 ] || die "binutils-aarch64-linux-gnu is missing and this is not root"
    log "installing binutils-aarch64-linux-gnu"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq binutils-aarch64-linux-gnu >"$LOGS/apt-binutils.log" 2>&1 \
        || { apt_update; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq binutils-aarch64-linux-gnu >"$LOGS/apt-binutils.log" 2>&1; } \
        || die "apt-get install binutils-aarch64-linux-gnu (see $LOGS/apt-binutils.log)"
fi
SHIMS=$STATE/hostbin
rm -rf "$SHIMS"; mkdir -p "$SHIMS"
for tool in objcopy objdump strip; do ln -s "$(command -v aarch64-linux-gnu-$tool)" "$SHIMS/$tool"; done
# ldd FILE: the aarch64 loader's --list under qemu in the aarch64 root. Paths print as the guest
# sees them (/lib/aarch64-linux-gnu/...). Dropped: the nameless line qemu's loader prints for
# the main program (PyInstaller would look for a library called ''). sys.executable is the
# wrapper script; it is answered for the real interpreter.
cat >"$SHIMS/ldd" <<EOF
#!/bin/bash
[ \$# = 0 ] && { echo "ldd: missing file arguments" >&2; exit 1; }
f=\${!#}
case \$f in "$STATE/bin/python-"*) f="$GUEST_PY";; esac
out=\$("$QEMU" -L "$ROOT" "$ROOT/lib/ld-linux-aarch64.so.1" --list "\$f") || exit
grep -v '^[[:space:]]*(0x' <<<"\$out"
exit 0
EOF
# ldconfig -p: the aarch64 root's libraries (the first line is skipped by PyInstaller)
cat >"$SHIMS/ldconfig" <<EOF
#!/bin/bash
cd "$ROOT" || exit 1
libs=(lib/aarch64-linux-gnu/*.so* usr/lib/aarch64-linux-gnu/*.so*)
echo "\${#libs[@]} libs found in cache /etc/ld.so.cache"
for f in "\${libs[@]}"; do printf '\t%s (libc6,AArch64) => /%s\n' "\${f##*/}" "\$f"; done
EOF
chmod +x "$SHIMS/ldd" "$SHIMS/ldconfig"
"$SHIMS/ldd" "$GUEST_PY" >"$LOGS/ldd-probe.log" 2>&1 || { cat "$LOGS/ldd-probe.log"; die "ldd shim"; }
grep -q '/lib/aarch64-linux-gnu/libc.so.6' "$LOGS/ldd-probe.log" || { cat "$LOGS/ldd-probe.log"; die "ldd shim: no libc"; }

# --- the build: build/build.sh under emulation, with PY= the emulated Python ------------------
# build.sh runs "$PY -m PyInstaller ..." and lists the archive with "$PY -m ...archive_viewer".
# PY is the wrapper from prefix_for (qemu -0 makes it sys.executable, so PyInstaller's isolated
# subprocesses re-enter qemu the same way); with PY given, build.sh makes no venv.
PY=$STATE/bin/python-$CPU
grep -q '${PY:-' "$REPO/build/build.sh" \
    || die "build/build.sh does not honour PY= (it would make an x86 venv): see build/aarch64/README.md"
log "guest: $("$PY" -c 'import platform, PyInstaller, onnxruntime, numpy; print(platform.machine(), "glibc", platform.libc_ver()[1], "PyInstaller", PyInstaller.__version__, "onnxruntime", onnxruntime.__version__, "numpy", numpy.__version__)' 2>&1 | tail -1)"
log "building $DIST/edge-translator$([ "${ONEDIR:-}" = 1 ] && echo ' (one-folder)') under QEMU_CPU=$CPU (log: $LOGS/build.log)"
t0=$SECONDS
rm -rf "$DIST/edge-translator"
set +e
env PATH="$SHIMS:$PATH" PY="$PY" PYINSTALLER_CONFIG_DIR="$STATE/pyinstaller" \
    DIST="$DIST" WORK="$STATE/pyi-work-$CPU" TARGETS=edge-translator LOG_LEVEL="${LOG_LEVEL:-INFO}" \
    MAX_CLI_MB="${MAX_CLI_MB:-50}" \
    bash "$REPO/build/build.sh" >"$LOGS/build.log" 2>&1
rc=$?; set -e
T_BUILD=$((SECONDS - t0))
grep '^build.sh:' "$LOGS/build.log" || true
[ $rc = 0 ] || { tail -30 "$LOGS/build.log"; die "build/build.sh rc=$rc after ${T_BUILD}s (see $LOGS/build.log)"; }
if [ "${ONEDIR:-}" = 1 ]; then APP=$DIST/edge-translator/edge-translator; else APP=$DIST/edge-translator; fi
log "built in ${T_BUILD}s: $(file -b "$APP" | cut -d, -f1-2)"

# --- smoke: the app under qemu ----------------------------------------------------------------
# PyInstaller's bootloader on Linux always runs in two processes, one-file and one-folder
# alike: it sets LD_LIBRARY_PATH, then fork()s and exec()s its own file for the Python half.
# qemu 7.2 hands that exec to the host kernel, which runs an aarch64 ELF only through a
# binfmt_misc handler; without one, execvp's ENOEXEC fallback feeds the file to /bin/sh
# ("Syntax error: word unexpected"). So: use a registered aarch64 handler, or register a
# temporary one (root; removed again, and binfmt_misc unmounted if this mounted it, on exit).
# QEMU_LD_PREFIX and QEMU_CPU reach the re-exec'd qemu through the environment.
binfmt_cleanup=()
cleanup() { local c; for c in "${binfmt_cleanup[@]}"; do eval "$c" || true; done; }
trap cleanup EXIT
trap "exit 1" INT TERM HUP
BF=/proc/sys/fs/binfmt_misc
AARCH64_MAGIC='7f454c460201010000000000000000000200b700'
binfmt_handler() {  # prints how aarch64 ELF files get run, or fails
    [ -e $BF/status ] || return 1
    [ "$(cat $BF/status)" = enabled ] || return 1
    local f
    for f in $BF/*; do
        case ${f##*/} in register|status) continue;; esac
        if grep -qx enabled "$f" && grep -q "^magic $AARCH64_MAGIC" "$f"; then
            echo "${f##*/} ($(sed -n 's/^interpreter //p' "$f"))"; return 0
        fi
    done
    return 1
}
binfmt_register() {
    [ "$(id -u)" = 0 ] || return 1
    if [ ! -e $BF/status ]; then
        mount -t binfmt_misc binfmt_misc $BF 2>/dev/null || return 1
        binfmt_cleanup=("umount $BF" "${binfmt_cleanup[@]}")
    fi
    local name=edge-translator-aarch64
    # qemu's own aarch64 magic and mask (scripts/qemu-binfmt-conf.sh); no flags: qemu is
    # opened when a file is run, argv[0] becomes the file's path.
    printf '%s' ":$name:M::\\x7fELF\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\xb7\\x00:\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xfe\\xff\\xff\\xff:$QEMU:" \
        >$BF/register 2>/dev/null || return 1
    binfmt_cleanup=("echo -1 >$BF/$name" "${binfmt_cleanup[@]}")
}
SMOKE_RESULT=skipped
if [ "${SMOKE:-1}" = 1 ]; then
    handler=$(binfmt_handler || true)
    if [ -z "$handler" ] && [ "${BINFMT:-auto}" != 0 ]; then
        binfmt_register && handler="$(binfmt_handler) (temporary)" || handler=
    fi
    log "binfmt_misc aarch64 handler: ${handler:-none}"
    if [ -z "$handler" ]; then
        log "SKIP smoke: the app re-execs itself, which needs a binfmt_misc handler for aarch64 under qemu-user"
    else
        export HOME=$STATE/smoke-home XDG_DATA_HOME=$STATE/smoke-home/data XDG_CONFIG_HOME=$STATE/smoke-home/config \
               XDG_CACHE_HOME=$STATE/smoke-home/cache
        rm -rf "$HOME"; mkdir -p "$HOME"
        fails=0
        for cpu in $SMOKE_CPUS; do
            prefix_for "$cpu"
            # A stand-in DIST for smoke.sh: DIST/edge-translator runs the app under qemu.
            SMOKE_DIST=$STATE/smoke-dist-$cpu
            rm -rf "$SMOKE_DIST"; mkdir -p "$SMOKE_DIST"
            cat >"$SMOKE_DIST/edge-translator" <<EOF
#!/bin/sh
QEMU_LD_PREFIX="$STATE/cpu/$cpu" QEMU_CPU=$cpu exec "$QEMU" "$APP" "\$@"
EOF
            chmod +x "$SMOKE_DIST/edge-translator"
            t0=$SECONDS
            if out=$("$SMOKE_DIST/edge-translator" --version 2>&1); then :; else fails=1; fi
            log "$cpu: --version ($((SECONDS - t0))s): $out"
            t0=$SECONDS
            if out=$("$SMOKE_DIST/edge-translator" translate "Hello. How are you today?" 2>"$LOGS/smoke-translate-$cpu.err") \
                && printf '%s' "$out" | python3 -c 'import sys; t = sys.stdin.read(); sys.exit(0 if any("\u4e00" <= c <= "\u9fff" for c in t) else 1)'
            then log "$cpu: translate ($((SECONDS - t0))s): $out"
            else fails=1; log "$cpu: translate FAILED ($((SECONDS - t0))s): '$out' $(tail -3 "$LOGS/smoke-translate-$cpu.err")"; fi
            # build/smoke.sh's own checks too (--version, translate, serve, docs; no GUI here)
            t0=$SECONDS
            if bash "$REPO/build/smoke.sh" "$SMOKE_DIST" >"$LOGS/smoke-$cpu.log" 2>&1; then :; else fails=1; fi
            sed 's/^/    smoke.sh: /' "$LOGS/smoke-$cpu.log"
            log "$cpu: build/smoke.sh ($((SECONDS - t0))s)"
        done
        [ $fails = 0 ] && SMOKE_RESULT=passed || SMOKE_RESULT=FAILED
    fi
fi

echo
echo "===== aarch64 build: $QEMU_VERSION, QEMU_CPU=$CPU, python$PYV (Debian arm64, glibc $(basename "$(ls "$DEBS"/libc6_*_arm64.deb | sort -V | tail -1)" | cut -d_ -f2)); host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
echo "app: $APP, $(stat -c %s "$APP") bytes; build ${T_BUILD}s; smoke ($SMOKE_CPUS) $SMOKE_RESULT; total $((SECONDS - START))s"
[ "$SMOKE_RESULT" != FAILED ]
