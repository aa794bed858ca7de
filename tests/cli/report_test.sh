#!/usr/bin/env bash
# perfcast report: an HTML page from predict, comm, shard and replay results, validation
# lines, kernels, trace-stats, index-stats, calibrate and profile results; well-formed XHTML with one SVG chart per plot; bad input exits 2 and writes
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

# Measured and fitted results: kernels (single and measured rows), trace-stats, index-stats,
# the three calibrations and a profile dry run, one section each.
h100=$src/configs/systems/h100_sxm.json
"$perfcast" -q kernels --system "$h100" --gemm m=1,n=8192,k=8192,dtype=bf16 --gemm m=4096,n=4096,k=4096,dtype=bf16 \
  --json "$tmp/kernels_single.json" > /dev/null
{ echo "row_id,source_id,source_url,source_date,gpu,gpu_class,software,implementation,op,dtype,layout,M,N,K,batch_or_groups,time_us,tflops,gbps,derived_fields,measurement,transcription,notes"
  echo "g1,hand,https://example.invalid,2026-01-01,H100 SXM,H100,x,cuBLAS,gemm,bf16,TN,4096,4096,4096,1,250,,,,,,"
  echo "g2,hand,https://example.invalid,2026-01-01,H100 SXM,H100,x,cuBLAS,gemm,bf16,TN,8192,8192,8192,1,1800,,,,,,"
  echo "g3,hand,https://example.invalid,2026-01-01,H100 SXM,H100,x,cuBLAS,conv,bf16,TN,1,1,1,1,10,,,,,,"
} > "$tmp/rows.csv"
"$perfcast" -q kernels --system "$h100" --measurements "$tmp/rows.csv" --json "$tmp/kernels_rows.json" > /dev/null
"$perfcast" -q trace-stats "$src/tests/data/kineto_rank0.json" "$src/tests/data/kineto_rank1.json" --json "$tmp/trace_stats.json" > /dev/null
"$perfcast" -q index-stats --locality "$src/data/dlrm-datasets-locality/locality_stats_2021_t856_bs65536.txt" --json "$tmp/index_stats.json" > /dev/null
"$perfcast" -q calibrate comms --system "$src/configs/systems/aws_p5.json" --nccl-tests "$src/data/public-measurements/nccl_two_node_p5.csv" \
  --out "$tmp/p5.comms.json" --leave-one-source-out --json "$tmp/cal_comms.json" > /dev/null
"$perfcast" -q profile --sweep "$src/configs/sweeps/memcpy.json" --dry-run --json "$tmp/profile.json" > /dev/null
measured=("$tmp/kernels_single.json" "$tmp/kernels_rows.json" "$tmp/trace_stats.json" "$tmp/index_stats.json" "$tmp/cal_comms.json" "$tmp/profile.json")
"$perfcast" report "${measured[@]}" --out "$tmp/measured.html" > /dev/null
check "kernels, trace-stats, index-stats, calibrate and profile results: one section each, by hand" python3 - "$tmp/measured.html" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
sections = root.findall(".//h:section", ns)
assert len(sections) == 6, len(sections)
heads = [s.find("h:h2", ns).text for s in sections]
assert [h.split(":")[0] for h in heads] == ["kernels", "kernels", "trace-stats (measured)", "index-stats (measured indices)",
                                            "calibrate comms", "profile (dry run)"], heads
texts = lambda sec: [t.text or "" for t in sec.findall(".//s:text", ns)]
# Single kernels: two bars with their predictor. Measured rows: 2 expressible rows (the conv
# row is named as not expressible), 2 scatter markers.
assert sum("gemm.calibrated" in t for t in texts(sections[0])) == 2, texts(sections[0])
paras = lambda sec: " ".join(p.text or "" for p in sec.findall("h:p", ns))
assert "3 measured rows: 2 predicted, 1 not expressible" in paras(sections[1]), paras(sections[1])
assert len(sections[1].findall(".//s:circle", ns)) == 2
# trace-stats: one bar per traced step (2 ranks x 1 step).
assert sum(t.startswith("rank ") and " step " in t for t in texts(sections[2])) == 2, texts(sections[2])
# index-stats: the 2021 locality file's tables, each in both charts.
assert "table(s)" in paras(sections[3])
# calibrate comms: a fitted and a prior bar, one bar per source left out (2 sources).
assert sum(t.startswith("without ") for t in texts(sections[4])) == 2, texts(sections[4])
assert "p5.comms.json" in paras(sections[4])
# profile: the memcpy sweep's cases.
assert any(t.startswith("90 cases") for t in texts(sections[5])), texts(sections[5])
PY

[ "$fails" = 0 ] && echo "all report tests passed" || { echo "$fails failed"; exit 1; }
