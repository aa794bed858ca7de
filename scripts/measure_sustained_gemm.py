#!/usr/bin/env python3
"""Runs the GEMMs of a Transformer layer back to back for a while, as a training step keeps the
tensor cores busy, and records over time what the GPU sustains: the GEMM rate (TFLOP/s) and the
SM clock, board power, temperature and clock-event reasons nvidia-smi reports. perfcast's kernel
rates come from single launches after an L2 flush, on a GPU that is mostly idle between them; this
says how far a busy GPU falls below them, per precision. Needs python3 with PyTorch, one CUDA GPU
and nvidia-smi.

    scripts/measure_sustained_gemm.py --out DIR [--seconds 40] [--hidden 4096]

Writes DIR/sustained_gemm.csv (one row per timed batch of GEMMs: precision, seconds since that
precision's start, batch time, TFLOP/s, and the nvidia-smi sample nearest in time),
DIR/sustained_gemm_smi.csv (every nvidia-smi sample, 100 ms apart) and
DIR/sustained_gemm_summary.csv, and prints per precision the layer's rate with each GEMM
launched alone after an L2 flush (as perfcast's kernel tables are timed), back to back in the
first second, and over the last quarter of the run, with the SM clocks then. The layer is
Megatron's GPT layer at hidden h, sequence 4096, micro-batch 1, no tensor parallelism: QKV
(4096 x 3h x h), attention projection (4096 x h x h), fc1 (4096 x 4h x h), fc2 (4096 x h x 4h),
forward then the backward's two GEMMs of each; bf16 (torch.matmul) then fp8 e4m3 with per-tensor
scales (torch._scaled_mm), each for half of --seconds.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

SMI_FIELDS = ["timestamp", "clocks.sm", "power.draw", "temperature.gpu", "clocks_event_reasons.active"]
SMI_FIELDS_OLD = ["timestamp", "clocks.sm", "power.draw", "temperature.gpu", "clocks_throttle_reasons.active"]


def start_smi(path):
    """nvidia-smi sampling every 100 ms into `path` (CSV), or None without nvidia-smi."""
    for fields in (SMI_FIELDS, SMI_FIELDS_OLD):
        cmd = ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits", "-lms", "100"]
        try:
            probe = subprocess.run(cmd[:-2], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None, None
        if probe.returncode == 0:
            out = open(path, "w")
            out.write(",".join(fields) + ",host_time_s\n")
            out.flush()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1)
            return proc, out
    return None, None


def layer_gemms(h):
    """(M, N, K) of one GPT layer's GEMMs at hidden h, 4096 tokens: forward, then per GEMM the
    backward's input-gradient and weight-gradient GEMMs."""
    t = 4096
    forward = [(t, 3 * h, h), (t, h, h), (t, 4 * h, h), (t, h, 4 * h)]
    backward = []
    for m, n, k in forward:
        backward.append((m, k, n))  # dX = dY W
        backward.append((n, k, m))  # dW = dY^T X
    return forward + backward


def summarize(rows):
    """Median TFLOP/s and the SM clocks seen in the first second and over the last quarter of one
    precision's rows; None without rows."""
    if not rows:
        return None
    seconds = float(rows[-1]["t_s"])
    first = [r for r in rows if float(r["t_s"]) <= 1.0] or rows[:1]
    late = [r for r in rows if float(r["t_s"]) >= 0.75 * seconds] or rows[-1:]
    clocks = lambda rs: "/".join(sorted({r["sm_clock_mhz"] for r in rs if r["sm_clock_mhz"]})[:3]) or "?"
    rate = lambda rs: statistics.median(float(r["tflops"]) for r in rs)
    return {"seconds": seconds, "first": rate(first), "first_clock": clocks(first), "late": rate(late), "late_clock": clocks(late)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for sustained_gemm.csv and sustained_gemm_smi.csv")
    ap.add_argument("--seconds", type=float, default=40.0, help="whole run; half per precision")
    ap.add_argument("--hidden", type=int, default=4096, help="the layer's hidden size")
    args = ap.parse_args()
    if args.seconds <= 0 or args.hidden < 256 or args.hidden % 16:
        print("error: --seconds must be positive and --hidden a multiple of 16 from 256", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("error: PyTorch is not installed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: no CUDA GPU is visible to PyTorch", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    smi_path = os.path.join(args.out, "sustained_gemm_smi.csv")
    smi, smi_out = start_smi(smi_path)
    samples = []  # (host time, clocks.sm, power, reasons)

    def drain_smi():
        if smi is None:
            return
        import select
        while select.select([smi.stdout], [], [], 0)[0]:
            line = smi.stdout.readline()
            if not line:
                return
            now = time.monotonic()
            smi_out.write(line.rstrip("\n") + ",{:.3f}\n".format(now))
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 5:
                samples.append((now, parts[1], parts[2], parts[4]))

    shapes = layer_gemms(args.hidden)
    rows = []
    isolated = {}  # precision -> TFLOP/s of the layer's GEMMs launched one at a time
    precisions = ["bf16"]
    if hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn"):
        precisions.append("fp8")
    per_precision = args.seconds / len(precisions)
    for precision in precisions:
        ops = []
        for m, n, k in shapes:
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            if precision == "fp8":
                a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()
                one = torch.ones((), device="cuda", dtype=torch.float32)
                ops.append((lambda a8=a8, b8=b8, one=one: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                                         out_dtype=torch.bfloat16), 2.0 * m * n * k))
            else:
                bt = b.t()
                ops.append((lambda a=a, bt=bt: torch.matmul(a, bt), 2.0 * m * n * k))
        flops_per_layer = sum(f for _, f in ops)
        for fn, _ in ops:  # warm-up: cuBLAS heuristics and workspaces
            fn()
        torch.cuda.synchronize()
        # The layer as perfcast's kernel tables time it: each GEMM launched alone after the L2 is
        # overwritten and a short idle pause, median of 5.
        flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
        isolated_ms = 0.0
        for fn, _ in ops:
            times = []
            for _ in range(5):
                time.sleep(0.02)
                flush.zero_()
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                fn()
                end.record()
                end.synchronize()
                times.append(begin.elapsed_time(end))
            isolated_ms += statistics.median(times)
        del flush
        isolated[precision] = flops_per_layer / isolated_ms / 1e9
        start = time.monotonic()
        # Batches of 4 layers (about 10-30 ms on a Hopper GPU), timed by CUDA events; the queue
        # is kept two batches deep so that the GPU never waits for the host.
        pending = []
        while True:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(4):
                for fn, _ in ops:
                    fn()
            end.record()
            pending.append((begin, end))
            if len(pending) > 2:
                b0, e0 = pending.pop(0)
                e0.synchronize()
                ms = b0.elapsed_time(e0)
                now = time.monotonic()
                drain_smi()
                near = min(samples, key=lambda s: abs(s[0] - now)) if samples else (now, "", "", "")
                rows.append({"precision": precision, "hidden": args.hidden, "t_s": "{:.3f}".format(now - start),
                             "batch_ms": "{:.3f}".format(ms), "tflops": "{:.1f}".format(4 * flops_per_layer / ms / 1e9),
                             "sm_clock_mhz": near[1], "power_w": near[2], "clock_event_reasons": near[3]})
            if time.monotonic() - start > per_precision:
                break
        torch.cuda.synchronize()
        del ops
        torch.cuda.empty_cache()
    drain_smi()
    if smi is not None:
        smi.terminate()
        smi_out.close()
    with open(os.path.join(args.out, "sustained_gemm.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, ["precision", "hidden", "t_s", "batch_ms", "tflops", "sm_clock_mhz", "power_w",
                               "clock_event_reasons"])
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(args.out, "sustained_gemm_summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["precision", "hidden", "isolated_tflops", "first_second_tflops", "first_second_sm_clock_mhz",
                    "last_quarter_tflops", "last_quarter_sm_clock_mhz", "seconds"])
        for precision in precisions:
            s = summarize([r for r in rows if r["precision"] == precision])
            if s is None:
                continue
            w.writerow([precision, args.hidden, "{:.1f}".format(isolated[precision]), "{:.1f}".format(s["first"]),
                        s["first_clock"], "{:.1f}".format(s["late"]), s["late_clock"], "{:.1f}".format(s["seconds"])])
            print("sustained {} GEMMs (hidden {}): {:.0f} TFLOP/s launched one at a time after an L2 flush; back to back "
                  "{:.0f} TFLOP/s in the first second (SM clock {} MHz) and {:.0f} TFLOP/s over the last quarter of {:.0f} s "
                  "(SM clock {} MHz): {:+.1f}% against one at a time".format(
                      precision, args.hidden, isolated[precision], s["first"], s["first_clock"], s["late"], s["seconds"],
                      s["late_clock"], 100 * (s["late"] / isolated[precision] - 1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
