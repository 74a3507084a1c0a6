#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh Debian machine: the system packages
# (Qt's libraries to draw offscreen, a CJK font, Chromium and its driver for the web page's
# browser tests, LibreOffice's Impress without its GUI: the second producer of the office
# formats' tests, poppler's pdftotext: text as people copy it out of a PDF; Xvfb, xclip,
# xdotool and Qt's xcb libraries: the desktop's clipboard, selection and shortcut tests on a
# real X server; dbus-daemon: a private session bus for the Wayland shortcut's fake portal),
# then .venv
# with the "dev" extra (every extra the tests need). The README's test command and .ci/run
# both start here. EXTRA_DEBS adds Debian packages (CI's compilers).
set -euo pipefail
cd "$(dirname "$0")/.."
DEBS="libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3 libglib2.0-0 fonts-wqy-microhei chromium chromium-driver libreoffice-impress-nogui libreoffice-calc-nogui libreoffice-writer-nogui poppler-utils xvfb xclip xdotool libxcb-cursor0 libxkbcommon-x11-0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-xkb1 dbus-daemon ${EXTRA_DEBS:-}"
if command -v apt-get >/dev/null; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    missing=$(for p in $DEBS; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
    if [ -n "$missing" ]; then
        $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends $missing
    fi
else
    echo "tests/setup.sh: no apt-get here; install the equivalents of: $DEBS" >&2
fi
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch is pinned in the "export" extra (2.13.0, served as a CPU build on these machines).
.venv/bin/python -m pip install -q -e ".[dev]"
