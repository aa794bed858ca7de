#!/usr/bin/env python3
"""Times attention (PyTorch SDPA: flash and cuDNN backends, forward and backward) and GEMMs
(fp8 per-tensor-scaled torch._scaled_mm, bf16 torch.matmul) on this machine's GPU and writes
them in the columns of the public Hopper tables (data/public-measurements/hopper-kernels/attention.csv
and gemm.csv), so that `perfcast kernels --measurements OUT/attention.csv OUT/gemm.csv` compares
them with perfcast's predictions. These are the kernel families perfcast's own profiler (`perfcast profile`) does
not time. Needs python3 with PyTorch and one CUDA GPU.

    scripts/measure_kernels_torch.py --out DIR [--seconds 60] [--source-id ID] [--dropout-cases 12]

First, attention with and without dropout at the shapes of Megatron-Core's GPT layers (one
sequence of 2K-8K tokens, 16-96 heads of 128, causal, bf16): each case with dropout_p 0 and 0.1,
forward and backward, flash and cuDNN backends, written to DIR/attention_dropout.csv (the
attention columns and `dropout_p`), so that the cost of dropout inside the fused kernel can be
read off pairs timed back to back. Then the random attention and GEMM cases.

Timing: CUDA events around each launch, the L2 cache overwritten (a 256 MiB buffer) before
each; 3 warm-ups, then the median of 10 timed launches (attention backward: the gradient call
alone, the forward graph kept). Rows are written as they are measured, so a run stopped at its
time budget keeps what it measured. Every row records the GPU, driver, PyTorch, CUDA and cuDNN
versions and the perfcast commit.
"""
import argparse
import csv
import datetime
import os
import random
import statistics
import subprocess
import sys
import time

ATTENTION_COLUMNS = ["row_id", "source_id", "source_url", "source_date", "gpu", "gpu_class", "software",
                     "implementation", "direction", "dtype", "batch", "seqlen_q", "seqlen_kv", "heads_q",
                     "heads_kv", "head_dim_qk", "head_dim_v", "causal", "layout", "time_us", "tflops",
                     "flops_convention", "derived_fields", "measurement", "transcription", "notes"]
GEMM_COLUMNS = ["row_id", "source_id", "source_url", "source_date", "gpu", "gpu_class", "software",
                "implementation", "op", "dtype", "layout", "M", "N", "K", "batch_or_groups", "time_us",
                "tflops", "gbps", "derived_fields", "measurement", "transcription", "notes"]
MEASUREMENT = ("CUDA events around each launch, L2 overwritten (256 MiB) before each; median of 10 "
               "after 3 warm-ups")


def commit():
    if os.environ.get("PERFCAST_COMMIT"):
        return os.environ["PERFCAST_COMMIT"]
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        return subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True).stdout
        return out.strip().splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def gpu_class(name):
    n = name.lower()
    if "h200" in n:
        return "H200"
    if "h100" in n:
        return "H100 PCIe" if "pcie" in n else "H100 SXM"
    return name


class Timer:
    """Median time of one launch (us), L2 overwritten before each."""

    def __init__(self, torch):
        self.torch = torch
        self.flush_buffer = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")

    def median_us(self, fn, warmup=3, reps=10):
        torch = self.torch
        for _ in range(warmup):
            fn()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            self.flush_buffer.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))


def attention_cases(rng):
    cases = []
    for _ in range(400):
        head_dim = rng.choice([64, 128, 128, 256])
        heads = rng.choice([8, 16, 32, 64])
        kv_heads = rng.choice([h for h in (heads, 8, 4, 1) if heads % h == 0])
        seq = rng.choice([512, 1024, 2048, 4096, 8192, 16384])
        tokens = rng.choice([8192, 16384, 32768])
        batch = max(1, tokens // seq)
        causal = rng.random() < 0.6
        dtype = rng.choice(["bf16", "bf16", "fp16"])
        cases.append((batch, seq, heads, kv_heads, head_dim, causal, dtype))
    return cases


def gemm_cases(rng):
    dims = [256, 512, 768, 1024, 1536, 2048, 3072, 4096, 5120, 6144, 8192, 12288, 16384]
    small_m = [16, 32, 64, 128]
    cases = []
    for _ in range(400):
        m = rng.choice(dims + small_m)
        n = rng.choice(dims)
        k = rng.choice(dims)
        cases.append((m, n, k))
    return cases


def attention_flops(batch, seq, heads, head_dim, causal):
    """Forward FLOPs, 4 B S^2 H D (halved when causal); backward is 2.5x (FlashAttention's convention)."""
    f = 4.0 * batch * seq * seq * heads * head_dim
    return f / 2 if causal else f


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for attention.csv and gemm.csv")
    ap.add_argument("--seconds", type=float, default=60.0, help="time budget of the whole run")
    ap.add_argument("--source-id", default="", help="source_id of the rows (default perfcast_torch_<gpu>_<date>)")
    ap.add_argument("--seed", type=int, default=20261127)
    ap.add_argument("--dropout-cases", type=int, default=12, help="attention shapes timed with and without dropout (0: none)")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not torch.cuda.is_available():
        print("error: no CUDA GPU is visible to PyTorch", file=sys.stderr)
        return 2
    deadline = time.monotonic() + args.seconds
    os.makedirs(args.out, exist_ok=True)
    name = torch.cuda.get_device_name(0)
    today = datetime.date.today().isoformat()
    source = args.source_id or "perfcast_torch_{}_{}".format(gpu_class(name).replace(" ", "_").lower(), today)
    software = "PyTorch {} (CUDA {}, cuDNN {}), driver {}, perfcast {}".format(
        torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), driver_version(), commit())
    common = {"source_id": source, "source_url": "scripts/measure_kernels_torch.py (perfcast {})".format(commit()),
              "source_date": today, "gpu": name, "gpu_class": gpu_class(name), "software": software,
              "measurement": MEASUREMENT, "transcription": "script (written by the measuring program)"}
    timer = Timer(torch)
    rng = random.Random(args.seed)
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    counts = {"attention": 0, "gemm": 0, "failed": 0}

    att_file = open(os.path.join(args.out, "attention.csv"), "w", newline="")
    gemm_file = open(os.path.join(args.out, "gemm.csv"), "w", newline="")
    att = csv.DictWriter(att_file, ATTENTION_COLUMNS)
    gemm = csv.DictWriter(gemm_file, GEMM_COLUMNS)
    att.writeheader()
    gemm.writeheader()
    drop_file = open(os.path.join(args.out, "attention_dropout.csv"), "w", newline="")
    drop = csv.DictWriter(drop_file, ATTENTION_COLUMNS + ["dropout_p"])
    drop.writeheader()

    def write_attention(case, backend, direction, us, dropout_p=None):
        batch, seq, heads, kv_heads, head_dim, causal, dtype = case
        flops = attention_flops(batch, seq, heads, head_dim, causal) * (2.5 if direction == "bwd" else 1.0)
        counts["attention"] += 1
        writer, extra = (att, {}) if dropout_p is None else (drop, {"dropout_p": dropout_p})
        writer.writerow(dict(common, **extra, row_id="att-{:05d}".format(counts["attention"]),
                          implementation="PyTorch SDPA ({} backend)".format(backend), direction=direction,
                          dtype=dtype, batch=batch, seqlen_q=seq, seqlen_kv=seq, heads_q=heads, heads_kv=kv_heads,
                          head_dim_qk=head_dim, head_dim_v=head_dim, causal="causal" if causal else "no",
                          layout="(B,H,S,D) contiguous", time_us="{:.2f}".format(us),
                          tflops="{:.1f}".format(flops / us / 1e6),
                          flops_convention="fwd 4*B*S^2*H*D (/2 if causal); bwd 2.5x fwd",
                          derived_fields="tflops", notes="GQA by enable_gqa" if kv_heads != heads else ""))
        att_file.flush()
        drop_file.flush()

    def measure_attention(case, backend, dropout_p=None):
        batch, seq, heads, kv_heads, head_dim, causal, dtype = case
        dt = dtypes[dtype]
        q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=dt, requires_grad=True)
        k = torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=dt, requires_grad=True)
        v = torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=dt, requires_grad=True)
        chosen = {"flash": SDPBackend.FLASH_ATTENTION, "cuDNN": SDPBackend.CUDNN_ATTENTION}[backend]
        with sdpa_kernel([chosen]):
            def forward():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads != heads,
                                                      dropout_p=dropout_p or 0.0)
            write_attention(case, backend, "fwd", timer.median_us(forward), dropout_p)
            out = forward()
            grad = torch.randn_like(out)
            write_attention(case, backend, "bwd", timer.median_us(
                lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)), dropout_p)

    def measure_gemm(m, n, k, fp8):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        if fp8:
            a8 = a.to(torch.float8_e4m3fn)
            b8 = b.to(torch.float8_e4m3fn).t()  # column-major K x N, as cuBLASLt's fp8 path needs
            one = torch.ones((), device="cuda", dtype=torch.float32)
            us = timer.median_us(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
            dtype, impl = "fp8_e4m3 in (per-tensor scales), bf16 out", "cuBLASLt via torch._scaled_mm"
            operand_bytes = m * k + k * n + 2 * m * n
        else:
            bt = b.t()
            us = timer.median_us(lambda: torch.matmul(a, bt))
            dtype, impl = "bf16", "cuBLAS via torch.matmul"
            operand_bytes = 2 * (m * k + k * n + m * n)
        counts["gemm"] += 1
        gemm.writerow(dict(common, row_id="gem-{:05d}".format(counts["gemm"]), implementation=impl, op="gemm",
                           dtype=dtype, layout="A MxK row-major, B NxK (TN)", M=m, N=n, K=k, batch_or_groups=1,
                           time_us="{:.2f}".format(us), tflops="{:.1f}".format(2.0 * m * n * k / us / 1e6),
                           gbps="{:.1f}".format(operand_bytes / us / 1e3), derived_fields="tflops, gbps", notes=""))
        gemm_file.flush()

    work = []
    # Dropout pairs first: Megatron-Core GPT layers (one sequence, heads of 128, causal, bf16).
    megatron_shapes = [(1, 4096, 16), (1, 4096, 32), (1, 4096, 64), (1, 2048, 32), (1, 8192, 32), (1, 4096, 96),
                       (1, 2048, 64), (1, 8192, 64), (2, 4096, 32), (1, 4096, 48), (1, 2048, 16), (1, 8192, 16)]
    for batch, seq, heads in megatron_shapes[:max(0, args.dropout_cases)]:
        case = (batch, seq, heads, heads, 128, True, "bf16")
        for backend in ("cuDNN", "flash"):
            for p in (0.0, 0.1):
                work.append(("dropout", case, (backend, p)))
    gemms = gemm_cases(rng)
    attentions = attention_cases(rng)
    # Interleaved so that a run cut by its budget still covers every family.
    for i in range(max(len(gemms), len(attentions))):
        if i < len(gemms):
            work.append(("gemm", gemms[i], True))
            work.append(("gemm", gemms[i], False))
        if i < len(attentions):
            work.append(("attention", attentions[i], "flash"))
            work.append(("attention", attentions[i], "cuDNN"))
    for kind, case, variant in work:
        if time.monotonic() > deadline:
            break
        try:
            if kind == "gemm":
                measure_gemm(*case, fp8=variant)
            elif kind == "dropout":
                measure_attention(case, variant[0], dropout_p=variant[1])
            else:
                measure_attention(case, variant)
        except Exception as e:  # a backend that refuses a shape: count it, go on
            counts["failed"] += 1
            print("skipped {} {} {}: {}".format(kind, case, variant, str(e).splitlines()[0][:160]), file=sys.stderr)
        torch.cuda.empty_cache()
    att_file.close()
    gemm_file.close()
    drop_file.close()
    print("measure_kernels_torch: {} attention rows, {} GEMM rows, {} cases refused; {} ({})".format(
        counts["attention"], counts["gemm"], counts["failed"], name, software))
    return 0


if __name__ == "__main__":
    sys.exit(main())
