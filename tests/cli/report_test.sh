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
# A grid (predict --sweep) whose second point does not fit in memory (micro-batch 64 of GPT-3
# 13B on 8 GPUs), and a plan search of GPT-2 on 4 GPUs.
gpt=$src/configs/workloads/gpt3_13b.json
"$perfcast" -q predict --system "$sys" --workload "$gpt" --set workload.global_batch=128 --sweep workload.micro_batch=1,64 --json "$tmp/grid.json" > /dev/null
"$perfcast" -q plan --system "$sys" --workload "$src/configs/workloads/gpt2.json" --gpus 4 --set workload.global_batch=16 \
  --set workload.micro_batch=1 --micro-batches 1,2 --json "$tmp/plan.json" > /dev/null
inputs=("$tmp/predict.json" "$tmp/comm.json" "$tmp/shard.json" "$src/tests/data/validation_results_small.jsonl" "$tmp/grid.json"
        "$tmp/plan.json")
"$perfcast" report "${inputs[@]}" --title "a <test> & more" --out "$tmp/report.html" > /dev/null
check "report exits 0" test $? = 0
# Sections: 6; charts: predict 3 (ranks, device memory, split), comm 1, shard 3, validate 1,
# grid 1, plan 1 = 10; the validation file has 3 lines with a measured time (index 2
# failed): 3 markers.
check "well-formed XHTML with 6 sections and 10 charts, 3 validation markers, escaped title" python3 - "$tmp/report.html" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
sections = root.findall(".//h:section", ns)
assert len(sections) == 6, len(sections)
charts = root.findall(".//h:section/s:svg", ns)
assert len(charts) == 10, len(charts)
assert len(sections[3].findall(".//s:circle", ns)) == 3
assert root.find(".//h:title", ns).text == "a <test> & more"
assert "<script" not in open(sys.argv[1]).read()
PY
check "values on the bars; the grid point that does not fit faded and marked; the plan's fastest named" python3 - "$tmp/report.html" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
sections = root.findall(".//h:section", ns)
texts = lambda sec: [t.text or "" for t in sec.findall(".//s:text", ns)]
assert any(t.endswith(" ms") for t in texts(sections[0])), "predict: no value on a bar"
grid = texts(sections[4])
assert sum("does not fit in memory" in t for t in grid) == 1, grid
assert len(sections[4].findall(".//s:rect[@fill-opacity]", ns)) == 1
plan = texts(sections[5])
assert any("fastest" in t for t in plan) and any("the workload's own" in t for t in plan), plan
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

# Tables in host memory: the shard's best plan with every sharded table moved to fused_uvm.
"$perfcast" -q shard --system "$sys" --workload "$wl" --evaluations 20 --out "$tmp/plan.json" > /dev/null
sed 's/"compute_kernel": "fused"/"compute_kernel": "fused_uvm"/' "$tmp/plan.json" > "$tmp/uvm_plan.json"
"$perfcast" -q predict --system "$sys" --workload "$wl" --plan "$tmp/uvm_plan.json" --json "$tmp/uvm.json" > /dev/null
"$perfcast" report "$tmp/uvm.json" --out "$tmp/uvm.html" > /dev/null
check "host memory drawn when tables live there, memory values as used of total" python3 - "$tmp/uvm.html" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
titles = [t.text for t in root.findall(".//s:svg/s:title", ns)]
assert "per-rank host memory (tables in host memory)" in titles, titles
texts = [t.text or "" for t in root.findall(".//s:text", ns)]
assert any(" of " in t and t.endswith(" GiB") for t in texts), texts
PY

[ "$fails" = 0 ] && echo "all report tests passed" || { echo "$fails failed"; exit 1; }
