#!/usr/bin/env bash
# attntrace model --report FILE.html opened in a real browser (headless Chromium): the page must
# run with no console message and no script error, draw one thumbnail per kept head (layers x
# heads), and a click on a thumbnail, or on a row of the detector table, must open that head large
# with the tokens as row and column labels. The page marks its state on <body>
# (lib/pictures/model_report.cpp): data-cells, data-thumbs, data-opened ("LAYER,HEAD"), data-ready,
# data-errors; #open=K,H clicks a thumbnail, #row=N a table row, #selftest the first thumbnail.
source "$(dirname "$0")/cli_common.bash"
need_numpy
BROWSER=$(command -v chromium || command -v chromium-browser || true)
[ -n "$BROWSER" ] || { echo "SKIP: chromium is not installed"; exit 77; }
M="$FIXTURES/models/full_gpt2"
run 0 "$A" model "$M" --text "the cat sat on the mat" --layers 0,2 --report "$W/r.html" --format json
cp "$W/out" "$W/trace.json"
grep -qiE '<(script|link|img|iframe)[^>]* (src|href)=' "$W/r.html" && fail "the report loads something from outside"
grep -q 'https\?://' "$W/r.html" && fail "the report names a network address"

profile=$(mktemp -d)
trap 'rm -rf "$W" "$profile"' EXIT
# dom HASH: the page opened as r.html#HASH, its DOM after the scripts ran, in $W/dom.html
dom() {
    timeout 120 "$BROWSER" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
        --enable-logging=stderr --v=0 --virtual-time-budget=10000 --dump-dom "file://$W/r.html#$1" \
        > "$W/dom.html" 2> "$W/browser.log" || fail "chromium failed: $(tail -5 "$W/browser.log")"
    grep -q 'CONSOLE' "$W/browser.log" && fail "console messages: $(grep CONSOLE "$W/browser.log" | head -5)"
    return 0
}
# check OPENED: the page drew every thumbnail and shows head OPENED ("LAYER,HEAD") with the tokens
check() {
    "$PYTHON" - "$W/dom.html" "$W/trace.json" "$1" <<'PY' || fail "the rendered page (#$hash)"
import html, json, re, sys
dom, trace, opened = open(sys.argv[1]).read(), json.load(open(sys.argv[2])), sys.argv[3]
body = re.search(r"<body([^>]*)>", dom).group(1)
attr = lambda name: (re.search(r'%s="([^"]*)"' % name, body) or [None, None])[1]
assert attr("data-errors") is None, "script errors: %s" % attr("data-errors")
assert attr("data-ready") == "1", "the page did not finish: %s" % body
assert attr("data-cells") == "8" and attr("data-thumbs") == "8", body   # 2 kept layers x 4 heads
assert len(re.findall(r'<canvas class="thumb', dom)) == 8, "thumbnail count"
assert attr("data-opened") == opened, "opened %s, expected %s" % (attr("data-opened"), opened)
view = dom[dom.index('id="view"'):dom.index('id="detectors"')]
text = lambda cls: [html.unescape(t) for t in re.findall(r'<div class="%s"[^>]*>([^<]*)</div>' % cls, view)]
# the tokens as a reader sees them: GPT-2's "Ġcat" is " cat", its space shown as U+2423
tokens = ["t", "he", "\u2423cat", "\u2423sat", "\u2423on", "\u2423the", "\u2423mat"]
assert text("qlabel") == tokens and text("klabel") == tokens, (text("qlabel"), text("klabel"))
layer, head = opened.split(",")
title = html.unescape(re.search(r'id="view-title">([^<]*)<', view).group(1))
assert title.startswith("layer %s, head %s" % (layer, head)), title
roles = [h.get("role") for l in trace["layers"] for h in l["heads"]]
assert dom.count('class="head-row has-role"') == sum(1 for r in roles if r), "detector rows with a role"
assert dom.count('<tr class="head-row') == 8, "detector rows"
PY
}
hash=selftest; dom "$hash"; check 0,0
hash=open=1,3; dom "$hash"; check 2,3     # the second kept layer is layer 2
hash=row=5; dom "$hash"; check 2,1        # table row 5: layer 2 (the second kept), head 1
echo "model report in a browser: ok"
