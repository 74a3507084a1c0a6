# Shared setup for run.sh and build.sh (sourced, not run): qemu-user-static, Debian's arm64
# Python unpacked into a root, the pinned aarch64 wheels installed into a site folder, and
# the per-CPU qemu prefixes with a fake Raspberry Pi /proc/cpuinfo. See README.md.
#
# The caller sets, before sourcing:
#   START HERE REPO WORK HOSTPY ORT_VERSION   as in run.sh
#   PINS=(name==version ...)                  the wheels (names as in the wheel files: a_b, not a-b)
#   STATE                                     root, site, cpu prefixes and wrappers go here
#   LOGS                                      log folder
#   SITE_PREFIX                               the site folder is $STATE/$SITE_PREFIX-py$PYV-ort$ORT_VERSION
#   WITH_LIBPYTHON=1                          also unpack libpython$PYV (the shared libpython; optional)
# It sets QEMU QEMU_VERSION PYV ROOT DEBS WHEELS GUEST_PY SITE GUEST_ENV NPROC, defines log,
# die, cpuinfo and prefix_for, and unsets EDGE_TRANSLATOR_MODEL QEMU_LD_PREFIX QEMU_CPU.

ROOT=$STATE/root
DEBS=$WORK/debs      # download caches, shared by every STATE
WHEELS=$WORK/wheels

mkdir -p "$WORK" "$DEBS" "$WHEELS" "$LOGS"
export PYTHONPYCACHEPREFIX=$WORK/pycache-host  # host-side Python writes no bytecode into the tree
log() { printf '[%4ds] %s\n' $((SECONDS - START)) "$*"; }
die() { log "FAILED: $*"; exit 1; }

# --- 1. qemu-user-static (Debian's) ------------------------------------------------------
apt_updated=0
apt_update() { [ $apt_updated = 1 ] || { log "apt-get update"; apt-get update -qq >"$LOGS/apt-update.log" 2>&1; apt_updated=1; }; }
if ! command -v qemu-aarch64-static >/dev/null; then
    [ "$(id -u)" = 0 ] || die "qemu-user-static is missing and this is not root"
    log "installing qemu-user-static"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static >"$LOGS/apt-qemu.log" 2>&1 \
        || { apt_update; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static >"$LOGS/apt-qemu.log" 2>&1; } \
        || die "apt-get install qemu-user-static (see $LOGS/apt-qemu.log)"
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
# Debian's python3.11 links libpython statically; PyInstaller needs the shared one to bundle.
if [ "${WITH_LIBPYTHON:-0}" = 1 ]; then PKGS+=(libpython$PYV); fi
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
    (cd "$DEBS" && apt-get download "${missing[@]}" >"$LOGS/apt-download.log" 2>&1) \
        || { apt_update; (cd "$DEBS" && apt-get download "${missing[@]}" >"$LOGS/apt-download.log" 2>&1); } \
        || die "apt-get download (see $LOGS/apt-download.log)"
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
        "$HOSTPY" -m pip download -q --no-deps -d "$WHEELS" "${PLAT[@]}" "$pin" >>"$LOGS/pip.log" 2>&1 \
            || die "pip download $pin (see $LOGS/pip.log)"
    fi
    wheels+=("$(ls $pattern | head -1)")
done
SITE=$STATE/$SITE_PREFIX-py$PYV-ort$ORT_VERSION
stamp=$(printf '%s\n' "${wheels[@]##*/}" | sha256sum | cut -c1-16)
if [ "$(cat "$SITE/.stamp" 2>/dev/null)" != "$stamp" ]; then
    log "installing ${#wheels[@]} wheels into $SITE"
    rm -rf "$SITE"
    "$HOSTPY" -m pip install -q --no-deps --no-index --target "$SITE" "${PLAT[@]}" "${wheels[@]}" \
        >>"$LOGS/pip.log" 2>&1 || die "pip install --target (see $LOGS/pip.log)"
    echo "$stamp" >"$SITE/.stamp"
fi
python3 "$HERE/closure.py" "$ROOT" "$SITE" >"$LOGS/closure.log" || { cat "$LOGS/closure.log"; die "library closure"; }
log "$(tail -1 "$LOGS/closure.log")"

# Everything the emulated Python runs gets this environment (host commands do not);
# PYTHONPYCACHEPREFIX keeps its bytecode out of the source tree (and makes reruns faster).
GUEST_ENV=(env PYTHONPATH="$SITE:$REPO" PYTHONNOUSERSITE=1 PYTHONPYCACHEPREFIX="$WORK/pycache" PYTHONUTF8=1
           HYPOTHESIS_STORAGE_DIRECTORY="$WORK/hypothesis")
unset EDGE_TRANSLATOR_MODEL QEMU_LD_PREFIX QEMU_CPU

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
    local cpu=$1 dir=$STATE/cpu/$1 d
    mkdir -p "$dir/proc" "$STATE/bin"
    for d in usr lib etc; do ln -sfn "$ROOT/$d" "$dir/$d"; done
    cpuinfo "$cpu" >"$dir/proc/cpuinfo"
    # sys.executable is this wrapper (qemu -0 sets argv[0]), so tests that start
    # `sys.executable -m edge_translator.cli` re-enter qemu with the same CPU and prefix
    # (no binfmt_misc registration needed).
    cat >"$STATE/bin/python-$cpu" <<EOF
#!/bin/sh
exec ${GUEST_ENV[@]@Q} QEMU_CPU=$cpu "$QEMU" -L "$dir" -0 "\$0" "$GUEST_PY" "\$@"
EOF
    chmod +x "$STATE/bin/python-$cpu"
}
