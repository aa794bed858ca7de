#!/usr/bin/env bash
# perfcast report: an HTML page from predict, comm, shard and replay results and validation
# lines; well-formed XHTML with one SVG chart per plot; bad input exits 2 and writes
# nothing; rendered to a PNG by headless Chromium where it is installed.
# Usage: report_test.sh PERFCAST_BINARY SOURCE_DIR
source "$(dirname "$0")/test_lib.sh"
sys=$src/configs/systems/dgx_h100.json
wl=$src/configs/workloads/dlrm_mlperf.json

"$perfcast" -q predict --system "$sys" --workload "$wl" --json "$tmp/predict.json" > /dev/null
"$perfcast" -q comm --system "$sys" --collective all_reduce --sizes 1MiB:64MiB --nodes 1,2 --json "$tmp/comm.json" > /dev/null
"$perfcast" -q shard --system "$sys" --workload "$wl" --evaluations 50 --json "$tmp/shard.json" > /dev/null
inputs=("$tmp/predict.json" "$tmp/comm.json" "$tmp/shard.json" "$src/tests/data/validation_results_small.jsonl")
"$perfcast" report "${inputs[@]}" --title "a <test> & more" --out "$tmp/report.html" > /dev/null
check "report exits 0" test $? = 0
# Sections: 4; charts: predict 2 (ranks, split), comm 1, shard 3, validate 1 = 7; the
# validation file has 3 lines with a measured time (index 2 failed): 3 markers.
check "well-formed XHTML with 4 sections and 7 charts, 3 validation markers, escaped title" python3 - "$tmp/report.html" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
sections = root.findall(".//h:section", ns)
assert len(sections) == 4, len(sections)
charts = root.findall(".//h:section/s:svg", ns)
assert len(charts) == 7, len(charts)
assert len(sections[3].findall(".//s:circle", ns)) == 3
assert root.find(".//h:title", ns).text == "a <test> & more"
assert "<script" not in open(sys.argv[1]).read()
PY
check "comm: one line per node count" python3 -c "
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert len(root.findall('.//{http://www.w3.org/2000/svg}polyline')) == 2" "$tmp/report.html"

echo '{"something": 1}' > "$tmp/other.json"
"$perfcast" report "$tmp/predict.json" "$tmp/other.json" --out "$tmp/bad.html" > /dev/null 2> "$tmp/err"
code=$?
check "an unknown result exits 2, names the file, writes nothing" \
  bash -c "test $code = 2 && grep -q 'other.json' '$tmp/err' && grep -q 'not a result perfcast can plot' '$tmp/err' && ! test -e '$tmp/bad.html'"
printf '{"schema": "x"}\n' > "$tmp/lines.jsonl"
"$perfcast" report "$tmp/lines.jsonl" --out "$tmp/bad2.html" > /dev/null 2> "$tmp/err"
check "a JSON-lines file of another schema exits 2" bash -c "test $? = 2 && grep -q 'lines.jsonl line 1' '$tmp/err'"

chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$chrome" ]; then
  (cd "$tmp" && timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --screenshot="$tmp/report.png" --window-size=1000,3000 \
    "file://$tmp/report.html" > /dev/null 2>&1)
  check "Chromium renders the page to a PNG" python3 -c "
import sys; b = open(sys.argv[1], 'rb').read(); assert b[:8] == b'\x89PNG\r\n\x1a\n' and len(b) > 20000, len(b)" "$tmp/report.png"
else
  echo "skip Chromium rendering (no chromium installed)"
fi

[ "$fails" = 0 ] && echo "all report tests passed" || { echo "$fails failed"; exit 1; }
