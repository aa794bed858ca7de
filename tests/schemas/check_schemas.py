#!/usr/bin/env python3
"""Checks docs/schemas/*.schema.json: each is a valid JSON Schema (draft 2020-12), every
shipped config validates against its schema, every golden predict output and fresh
predict outputs (a Transformer, a DLRM with --json) validate against predict_result, and
fresh plan, comm, shard, replay, validate --summarize and index-stats outputs against theirs.

Usage: check_schemas.py SOURCE_DIR [PERFCAST_BINARY]. Exit 0 all valid, 1 a violation,
77 (skipped) when the jsonschema module is missing (Debian: python3-jsonschema)."""
import glob
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("skipped: python3-jsonschema is not installed (scripts/install_deps.sh installs it)")
    sys.exit(77)

src = sys.argv[1]
perfcast = sys.argv[2] if len(sys.argv) > 2 else None
schemas = {}
for path in sorted(glob.glob(os.path.join(src, "docs", "schemas", "*.schema.json"))):
    with open(path) as f:
        s = json.load(f)
    jsonschema.Draft202012Validator.check_schema(s)
    schemas[s["$id"]] = jsonschema.Draft202012Validator(s)

failures = 0
checked = 0


def check(doc_path, doc, schema_id):
    global failures, checked
    checked += 1
    errors = sorted(schemas[schema_id].iter_errors(doc), key=lambda e: list(e.absolute_path))
    for e in errors[:5]:
        print(f"FAIL {doc_path}: /{'/'.join(str(p) for p in e.absolute_path)}: {e.message[:200]}")
    failures += bool(errors)


for path in sorted(glob.glob(os.path.join(src, "configs", "systems", "*.json")) +
                   glob.glob(os.path.join(src, "configs", "workloads", "*.json"))):
    with open(path) as f:
        doc = json.load(f)
    if doc.get("schema") not in schemas:
        print(f"FAIL {path}: no schema for \"{doc.get('schema')}\"")
        failures += 1
        continue
    check(path, doc, doc["schema"])

for path in sorted(glob.glob(os.path.join(src, "tests", "golden", "*.json"))):
    with open(path) as f:
        check(path, json.load(f), "perfcast.predict_result")

if perfcast:
    with tempfile.TemporaryDirectory() as tmp:
        # The last: 64 micro-batches (micro-batch 4, dp 8), so the steady state is extrapolated (context.steady_state).
        for system, workload, sets in [("dgx_h100", "gpt3_1.3b", []), ("dgx_h100", "dlrm_mlperf", []),
                                       ("dgx_h100", "gpt3_1.3b", ["--set", "workload.global_batch=2048"])]:
            out = os.path.join(tmp, f"{system}__{workload}{len(sets)}.json")
            subprocess.run([perfcast, "-q", "predict", "--system", os.path.join(src, "configs", "systems", system + ".json"),
                            "--workload", os.path.join(src, "configs", "workloads", workload + ".json"), "--json", out] + sets,
                           check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                result = json.load(f)
            check(out, result, "perfcast.predict_result")
            if sets and "steady_state" not in result["context"]:
                sys.exit(f"{out}: expected context.steady_state (64 micro-batches)")

        out = os.path.join(tmp, "plan.json")
        subprocess.run([perfcast, "-q", "plan", "--system", os.path.join(src, "configs", "systems", "dgx_h100.json"),
                        "--workload", os.path.join(src, "configs", "workloads", "gpt2.json"), "--gpus", "4",
                        "--set", "workload.global_batch=16", "--micro-batches", "1,2", "--json", out],
                       check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            check(out, json.load(f), "perfcast.plan_result")
        # The other commands' JSON outputs, each against its schema.
        import struct
        sysf = os.path.join(src, "configs", "systems", "dgx_h100.json")
        data = os.path.join(src, "tests", "data")
        with open(os.path.join(tmp, "idx.bin"), "wb") as f:
            f.write(struct.pack("<11i", 5, 5, 7, 5, 0, 1, 1, 1, 1, 1, 2))
        with open(os.path.join(tmp, "len.bin"), "wb") as f:
            f.write(struct.pack("<6i", 3, 1, 0, 2, 4, 1))
        runs = [
            ("comm1", "perfcast.comm_result", ["comm", "--system", sysf, "--collective", "all_reduce", "--sizes", "1MiB,1GiB"]),
            ("comm2", "perfcast.comm_result", ["comm", "--system", sysf, "--collective", "all_gather", "--sizes", "1MiB:64MiB", "--nodes", "1,2"]),
            ("shard", "perfcast.shard_result", ["shard", "--system", sysf, "--workload",
                                                os.path.join(src, "configs", "workloads", "dlrm_default.json"), "--evaluations", "30"]),
            ("replay", "perfcast.replay_result", ["replay", "--kineto", os.path.join(data, "kineto_rank0.json"), os.path.join(data, "kineto_rank1.json")]),
            ("validate", "perfcast.validate_summary", ["validate", "--summarize", os.path.join(data, "validation_results_small.jsonl")]),
            ("index", "perfcast.index_stats_result", ["index-stats", "--indices", os.path.join(tmp, "idx.bin"), "--lengths",
                                                       os.path.join(tmp, "len.bin"), "--tables", "2", "--batch", "3", "--rows", "10", "--dtype", "int32"]),
        ]
        # calibrate runtime: three DLRM runs (one held out) whose "measured" times are round values.
        with open(os.path.join(tmp, "runs.csv"), "w") as f:
            wl = os.path.abspath(os.path.join(src, "configs", "workloads", "dlrm_default.json"))
            f.write("workload,measured,set\n")
            for b, t in ((1024, "1ms"), (4096, "1.2ms"), (16384, "2.5ms")):
                f.write(f"{wl},{t},workload.batch_size={b}\n")
        os.makedirs(os.path.join(tmp, "runtimes"), exist_ok=True)
        runs.append(("runtime_fit", "perfcast.runtime_fit_result",
                     ["calibrate", "runtime", "--system", sysf, "--measurements", os.path.join(tmp, "runs.csv"),
                      "--out", os.path.join(tmp, "runtimes", "fit.json"), "--force"]))
        for name, schema_id, args in runs:
            out = os.path.join(tmp, name + ".json")
            subprocess.run([perfcast, "-q"] + args + ["--json", out], stdout=subprocess.DEVNULL)
            if not os.path.exists(out):
                print(f"FAIL {name}: perfcast {' '.join(args[:1])} wrote no JSON")
                failures += 1
                continue
            with open(out) as f:
                check(out, json.load(f), schema_id)
print(f"{checked} documents checked against {len(schemas)} schemas, {failures} failing")
sys.exit(1 if failures else 0)
