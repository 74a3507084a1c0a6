#!/usr/bin/env bash
# Run the frozen apps once each: the CLI's --version, translate, serve, docs (Markdown and
# a workbook) and corpus, and the GUI offscreen and on Xvfb (the hand-over, the clipboard
# and the global shortcut). Usage: build/smoke.sh [DIST]  (default dist/ of this checkout; a one-folder
# build's DIST/NAME/NAME is found too). Exits non-zero if any check fails.
set -uo pipefail

DIST=${1:-$(cd "$(dirname "$0")/.." && pwd)/dist}
app() { if [[ -x $DIST/$1/$1 ]]; then echo "$DIST/$1/$1"; else echo "$DIST/$1"; fi; }
CLI=$(app edge-translator)
GUI=$(app edge-translator-gui)
TMP=$(mktemp -d)
SERVER=
cleanup() { [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
# keep the user's translation memory and GUI settings out of it
export HOME=$TMP/home XDG_DATA_HOME=$TMP/data XDG_CONFIG_HOME=$TMP/config XDG_CACHE_HOME=$TMP/cache
mkdir -p "$HOME"
failed=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1" >&2; failed=1; }
has_cjk() { python3 -c 'import re, sys; sys.exit(not re.search("[\u4e00-\u9fff]", sys.stdin.read()))'; }

# 1. --version
if out=$("$CLI" --version 2>&1) && [[ $out == edge-translator* ]]; then pass "--version: $out"
else fail "--version: $out"; fi

# 2. translate
if out=$("$CLI" translate "Hello. Where is the station?" 2>&1) && has_cjk <<<"$out"; then pass "translate: $out"
else fail "translate: $out"; fi

# 3. serve on a free port, one LibreTranslate request, then SIGTERM
"$CLI" serve --port 0 2>"$TMP/serve.log" &
SERVER=$!
url=
for _ in $(seq 150); do  # up to 30 s for the model to load and warm
    url=$(grep -o 'http://[^ ]*' "$TMP/serve.log" | head -1)
    [[ -n $url ]] && break
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.2
done
if [[ -z $url ]]; then
    fail "serve: no address announced: $(tail -3 "$TMP/serve.log")"
else
    out=$(python3 - "$url" <<'PY' 2>&1
import json, sys, urllib.request
body = json.dumps({"q": "Good morning.", "source": "en", "target": "zh", "format": "text"}).encode()
request = urllib.request.Request(sys.argv[1] + "/translate", body, {"Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(request, timeout=30))["translatedText"])
PY
)
    if has_cjk <<<"$out"; then pass "serve $url POST /translate: $out"; else fail "serve: $out"; fi
    # the web page's files travel inside the app (package data read through importlib.resources)
    out=$(python3 - "$url" <<'PY' 2>&1
import sys, urllib.request
for path in ("/", "/static/app.js", "/static/style.css"):
    with urllib.request.urlopen(sys.argv[1] + path, timeout=30) as answer:
        print(path, answer.status, len(answer.read()), answer.headers["Content-Security-Policy"] is not None)
PY
)
    if ! grep -qv ' 200 [0-9]* True$' <<<"$out"; then pass "serve GET / and its files"; else fail "serve web page: $out"; fi
    kill -TERM "$SERVER"
    for _ in $(seq 50); do kill -0 "$SERVER" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$SERVER" 2>/dev/null; then fail "serve: still running 10 s after SIGTERM"; kill -KILL "$SERVER"
    else wait "$SERVER"; rc=$?; [[ $rc == 0 ]] && pass "serve: stopped on SIGTERM" || fail "serve: exit $rc on SIGTERM"; fi
fi
SERVER=

# 4. docs on a small Markdown file
printf '# A short note\n\nI have two brothers. My father is a doctor.\n\n- Where is the bank?\n' >"$TMP/note.md"
if out=$("$CLI" docs "$TMP/note.md" 2>&1) && [[ -f $TMP/note.zh-Hans.md ]] && has_cjk <"$TMP/note.zh-Hans.md"; then
    pass "docs: $(tr '\n' ' ' <"$TMP/note.zh-Hans.md")"
else fail "docs: $out"; fi

# 4b. docs on a small workbook (inline strings, as openpyxl writes them; stdlib zipfile only)
python3 - "$TMP/prices.xlsx" <<'PY'
import sys, zipfile
ns = "http://schemas.openxmlformats.org/"
ct = "application/vnd.openxmlformats-officedocument.spreadsheetml"
parts = {
    "[Content_Types].xml": f'<Types xmlns="{ns}package/2006/content-types"><Default Extension="rels" '
    f'ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Override PartName="/xl/workbook.xml" '
    f'ContentType="{ct}.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" '
    f'ContentType="{ct}.worksheet+xml"/></Types>',
    "_rels/.rels": f'<Relationships xmlns="{ns}package/2006/relationships"><Relationship Id="r1" '
    f'Type="{ns}officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>',
    "xl/workbook.xml": f'<workbook xmlns="{ns}spreadsheetml/2006/main" xmlns:r="{ns}officeDocument/2006/relationships">'
    '<sheets><sheet name="Prices" sheetId="1" r:id="r1"/></sheets></workbook>',
    "xl/_rels/workbook.xml.rels": f'<Relationships xmlns="{ns}package/2006/relationships"><Relationship Id="r1" '
    f'Type="{ns}officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>',
    "xl/worksheets/sheet1.xml": f'<worksheet xmlns="{ns}spreadsheetml/2006/main"><sheetData><row r="1">'
    '<c r="A1" t="inlineStr"><is><t>Where is the station?</t></is></c><c r="B1"><v>12.5</v></c></row>'
    '</sheetData></worksheet>',
}
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for name, text in parts.items():
        z.writestr(name, text)
PY
if out=$("$CLI" docs "$TMP/prices.xlsx" 2>&1) && [[ -f $TMP/prices.zh-Hans.xlsx ]] \
    && python3 -c 'import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).read("xl/worksheets/sheet1.xml").decode())' \
        "$TMP/prices.zh-Hans.xlsx" | has_cjk; then pass "docs: prices.xlsx"
else fail "docs xlsx: $out"; fi

# 4c. corpus on a small JSON Lines file; --ray names the extra (Ray is never in the app)
printf '{"id": 1, "text": "Where is the bank?"}\n{"id": 2, "text": null}\n' >"$TMP/rows.jsonl"
if out=$("$CLI" corpus "$TMP/rows.jsonl" "$TMP/rows.zh.jsonl" --quiet 2>&1) && has_cjk <"$TMP/rows.zh.jsonl" \
    && [[ $(wc -l <"$TMP/rows.zh.jsonl") == 2 ]]; then pass "corpus: $(head -1 "$TMP/rows.zh.jsonl")"
else fail "corpus: $out"; fi
out=$("$CLI" corpus "$TMP/rows.jsonl" "$TMP/ray" --ray 2>&1); rc=$?
if [[ $rc == 6 && $out == *"edge-translator[ray]"* && $(wc -l <<<"$out") == 1 ]]; then pass "corpus --ray: $out"
else fail "corpus --ray: exit $rc: $out"; fi

# 5. the GUI offscreen: --self-test types a sentence into the window, waits for the
# translation, prints it and quits (exit 0 only if it is Chinese)
if [[ -x $GUI ]]; then
    if out=$(QT_QPA_PLATFORM=offscreen timeout 120 "$GUI" --self-test "I have two brothers." 2>"$TMP/gui.log") \
        && has_cjk <<<"$out"; then pass "gui --self-test: $out"
    else fail "gui --self-test: exit $?: $out $(tail -3 "$TMP/gui.log")"; fi
else
    echo "SKIP gui: no $GUI"
fi

# 5b. the GUI on an X server (Xvfb, with xclip and xdotool as the other apps): one window,
# a second start hands `--clipboard --copy` over within 5 s and the translation lands on the
# clipboard; the global shortcut translates the PRIMARY selection onto the clipboard
if [[ -x $GUI ]] && command -v Xvfb >/dev/null && command -v xclip >/dev/null && command -v xdotool >/dev/null; then
    Xvfb -displayfd 1 -screen 0 1280x800x24 -nolisten tcp >"$TMP/xvfb.num" 2>/dev/null &
    XVFB=$!
    for _ in $(seq 100); do [[ -s $TMP/xvfb.num ]] && break; sleep 0.1; done
    export DISPLAY=:$(head -1 "$TMP/xvfb.num") XDG_RUNTIME_DIR=$TMP/run
    mkdir -m 700 -p "$XDG_RUNTIME_DIR"
    QT_QPA_PLATFORM=xcb "$GUI" --global-shortcut ctrl+alt+e 2>"$TMP/gui-x.log" &
    WINDOW=$!
    for _ in $(seq 300); do [[ -S $XDG_RUNTIME_DIR/edge-translator-gui ]] && break; sleep 0.1; done
    clip() { timeout 10 xclip -selection "$1" -out 2>/dev/null; }
    wait_clip() { for _ in $(seq 150); do out=$(clip clipboard); [[ $out != "$1" ]] && has_cjk <<<"$out" && return 0; sleep 0.2; done; return 1; }
    printf 'Where is the train station?' | xclip -selection clipboard -in
    start=$(date +%s.%N)
    QT_QPA_PLATFORM=xcb timeout 30 "$GUI" --clipboard --copy 2>>"$TMP/gui-x.log"; rc=$?
    took=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)")
    if [[ $rc == 0 ]] && python3 -c "import sys; sys.exit(float(sys.argv[1]) >= 5)" "$took" \
        && wait_clip 'Where is the train station?' && kill -0 "$WINDOW" 2>/dev/null; then
        pass "gui --clipboard --copy: handed over in $took s, the clipboard holds $out"
    else fail "gui --clipboard --copy: exit $rc after $took s: $(clip clipboard) $(tail -3 "$TMP/gui-x.log")"; fi
    printf 'Hello.' | xclip -selection clipboard -in
    printf 'The red lamp is broken.' | xclip -selection primary -in
    xdotool key ctrl+alt+e
    if wait_clip 'Hello.'; then pass "gui global shortcut: the selection's translation on the clipboard: $out"
    else fail "gui global shortcut: $(clip clipboard) $(tail -3 "$TMP/gui-x.log")"; fi
    kill "$WINDOW" 2>/dev/null; wait "$WINDOW" 2>/dev/null
    kill "$XVFB" 2>/dev/null; wait "$XVFB" 2>/dev/null
    unset DISPLAY
else
    echo "SKIP gui on X11: no $GUI, Xvfb, xclip or xdotool"
fi

# 6. nothing written in the user's home but the translation memory (no ONNX Runtime
# telemetry device id or event cache under ~/.cache/Microsoft)
others=$(cd "$TMP" && find home cache data config -type f 2>/dev/null | grep -v '^data/edge-translator/' || true)
if [[ -z $others ]]; then
    pass "home: only the translation memory was written"
else fail "home: unexpected files: $(head -5 <<<"$others" | tr '\n' ' ')"; fi

exit $failed
