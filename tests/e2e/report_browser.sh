#!/usr/bin/env bash
# --report FILE.html opened in a real browser (headless Chromium): the page must run with no
# console message and no script error, draw one heatmap per head, and its hover must name the
# key query 0 attends to. The page marks its state on <body> (lib/include/attntrace/pictures/report.hpp):
# data-heatmaps, data-errors, and (opened as #selftest) data-selftest, the hover tip's text.
# Needs the Debian `chromium` package (the README's test command installs it); skipped without it.
source "$(dirname "$0")/cli_common.bash"
need_numpy
BROWSER=$(command -v chromium || command -v chromium-browser || true)
[ -n "$BROWSER" ] || { echo "SKIP: chromium is not installed"; exit 77; }

# 3 heads; head 0's query 0 is one-hot on key 4 ("mat").
"$PYTHON" - "$W" <<'PY'
import numpy as np, sys
w = sys.argv[1]
q = np.zeros((3, 6, 6), np.float32); k = np.zeros_like(q)
for h in range(3):
    q[h] = 40 * np.eye(6)
    k[h] = np.eye(6)[[(j + 2 * h + 2) % 6 for j in range(6)]]   # key j at position (j + 2h + 2) % 6
np.save(w + "/q.npy", q); np.save(w + "/k.npy", k); np.save(w + "/v.npy", np.ones((3, 6, 2), np.float32))
open(w + "/tokens.json", "w").write('["<s>", "the", "cat", "sat", "on", "mat"]')
PY
run 0 "$A" sdpa -q "$W/q.npy" -k "$W/k.npy" -v "$W/v.npy" --scale 1 --report "$W/r.html" --labels "$W/tokens.json"
grep -qiE '<(script|link|img)[^>]* (src|href)=' "$W/r.html" && fail "the report loads something from outside"
grep -q 'sdpa: scale' "$W/r.html" || fail "the report has no trace"
grep -q '<table id="stats">' "$W/r.html" || fail "the report has no head statistics"

profile=$(mktemp -d)
trap 'rm -rf "$W" "$profile"' EXIT
timeout 120 "$BROWSER" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
    --enable-logging=stderr --v=0 --virtual-time-budget=5000 --dump-dom "file://$W/r.html#selftest" \
    > "$W/dom.html" 2> "$W/browser.log" || fail "chromium failed: $(tail -5 "$W/browser.log")"
grep -q 'CONSOLE' "$W/browser.log" && fail "console messages: $(grep CONSOLE "$W/browser.log" | head -5)"
"$PYTHON" - "$W/dom.html" <<'PY' || fail "the rendered page"
import re, sys, html
dom = open(sys.argv[1]).read()
body = re.search(r"<body([^>]*)>", dom).group(1)
attr = lambda name: (re.search(r'%s="([^"]*)"' % name, body) or [None, None])[1]
assert attr("data-errors") is None, "script errors: %s" % attr("data-errors")
assert attr("data-heatmaps") == "3", "heatmaps drawn: %s" % attr("data-heatmaps")
assert len(re.findall(r'<canvas class="heatmap"', dom)) == 3, "canvas count"
tip = html.unescape(attr("data-selftest") or "")
lines = tip.splitlines()
# query 0 of head 0 attends to key j with (j + 2) % 6 == 0: j = 4, "on"; the tip lists it first
assert lines[0] == "query <s>" and lines[1] == "head 0:" and lines[2].startswith("on ") and "1.000" in lines[2], tip
PY
echo "report_browser: ok"
