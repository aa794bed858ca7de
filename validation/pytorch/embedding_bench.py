"""Times PyTorch's embedding bag on the configs perfcast's embedding sweep measured.

The realism check of the embedding kernel: "our forward should not be slower" than PyTorch on the same
configs. Input: the measurement JSON lines `perfcast profile --sweep
configs/sweeps/embedding.json` wrote (one line per config and pass; only
`embedding_forward` lines are used). For each, the same tables (rows, dim, mean pooling,
index distribution), batch and weight dtype are built in PyTorch and looked up with ONE
`torch.nn.functional.embedding_bag(mode="sum")` call over the tables concatenated into one
weight (indices shifted by each table's first row, bags table-major as in perfcast's
EmbeddingBagLayout): the strongest plain-PyTorch form of a multi-table lookup (one launch
per distinct table dim, where FBGEMM's TBE and our kernel use one for all). Indices come from the same samplers as the executor's
(validation/batch_generator.hpp, vectorized in dlrm_bench.sample_rows), not the same
values. Timing: CUDA events around each call, the L2 cache flushed before each repetition
(a 256 MiB memset outside the timed region, as the profiler does), median of --repetitions.

Writes JSON lines {"config", "perfcast_s", "torch_s", "torch_over_perfcast", provenance}
and prints the geomean of torch/perfcast and how many configs perfcast is not slower on.

  python3 validation/pytorch/embedding_bench.py --measurements validation/data/h100_sxm/embedding.jsonl \\
      --out validation/data/h100_sxm/embedding_torch.jsonl
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload_io as wio  # noqa: E402

_DTYPES = ("fp32", "fp16", "bf16")


def read_forward_configs(path):
    """The embedding_forward measurement lines of `path` -> list of (line number, config).

    A config: {"batch", "weight_dtype", "tables": [{"rows", "dim", "pooling", "distribution"}],
    "perfcast_s"}. Raises wio.WorkloadError naming the file, line and key for bad lines;
    other kernel families are skipped.
    """
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as e:
                raise wio.WorkloadError(where, "", f"not JSON: {e}") from None
            if not isinstance(doc, dict) or doc.get("schema") != "perfcast.measurement":
                raise wio.WorkloadError(where, "/schema", 'expected "perfcast.measurement"')
            k = doc.get("kernel")
            if not isinstance(k, dict) or k.get("family") != "embedding_forward":
                continue
            if k.get("weight_dtype") not in _DTYPES:
                raise wio.WorkloadError(where, "/kernel/weight_dtype", f"expected one of {', '.join(_DTYPES)}")
            batch = k.get("batch")
            if not isinstance(batch, int) or batch < 1:
                raise wio.WorkloadError(where, "/kernel/batch", "expected a positive integer")
            tables = k.get("tables")
            if not isinstance(tables, list) or not tables:
                raise wio.WorkloadError(where, "/kernel/tables", "expected a non-empty list")
            cfg_tables = []
            for i, t in enumerate(tables):
                p = f"/kernel/tables/{i}"
                if not isinstance(t, dict):
                    raise wio.WorkloadError(where, p, "expected an object")
                for key in ("rows", "dim"):
                    if not isinstance(t.get(key), int) or t[key] < 1:
                        raise wio.WorkloadError(where, f"{p}/{key}", "expected a positive integer")
                pooling = t.get("pooling")
                if not isinstance(pooling, (int, float)) or pooling < 0:
                    raise wio.WorkloadError(where, f"{p}/pooling", "expected a number >= 0")
                dist = wio.read_distribution(t.get("distribution", {"kind": "uniform"}), where, f"{p}/distribution")
                cfg_tables.append({"rows": t["rows"], "dim": t["dim"], "pooling": float(pooling), "distribution": dist})
            timing = doc.get("timing", {})
            median = parse_seconds(timing.get("median"), where, "/timing/median")
            out.append((n, {"batch": batch, "weight_dtype": k["weight_dtype"], "tables": cfg_tables,
                            "perfcast_s": median, "device": doc.get("device", {}).get("name", "")}))
    return out


def parse_seconds(v, where="<input>", pointer=""):
    """A measurement time: a number of seconds or a string such as "12.5us" / "1.2ms" / "0.5s"."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
        return float(v)
    units = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    if isinstance(v, str):
        s = v.strip()
        for u in ("ns", "us", "ms", "s"):
            if s.endswith(u):
                try:
                    x = float(s[: -len(u)])
                except ValueError:
                    break
                if x > 0:
                    return x * units[u]
    raise wio.WorkloadError(where, pointer, f"expected a positive time, got {v!r}")


def table_row_offsets(tables):
    """First row of each table in the concatenated weight."""
    out, at = [], 0
    for t in tables:
        out.append(at)
        at += t["rows"]
    return out


def summarize(ratios):
    """Geomean of torch/perfcast times and how many configs perfcast is not slower on."""
    if not ratios:
        return {"configs": 0, "geomean_torch_over_perfcast": None, "perfcast_not_slower": 0}
    g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    return {"configs": len(ratios), "geomean_torch_over_perfcast": g,
            "perfcast_not_slower": sum(1 for r in ratios if r >= 1.0)}


def dim_groups(tables):
    """Tables grouped by dim (in first-seen order): [(dim, [table index...])]."""
    groups = {}
    for i, t in enumerate(tables):
        groups.setdefault(t["dim"], []).append(i)
    return list(groups.items())


def time_config(torch, cfg, device, reps, warmup, gen, flush):
    """Median seconds of the forward of `cfg` on `device`: one fused embedding_bag call per
    distinct table dim (a call needs one weight matrix), all of them between the events."""
    import dlrm_bench  # noqa: E402 (torch-dependent helpers)
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[cfg["weight_dtype"]]
    b = cfg["batch"]
    calls = []
    for dim, members in dim_groups(cfg["tables"]):
        tables = [cfg["tables"][i] for i in members]
        weight = torch.empty(sum(t["rows"] for t in tables), dim, dtype=dtype, device=device).uniform_(-0.01, 0.01)
        idx_parts, lengths = [], []
        for t, first in zip(tables, table_row_offsets(tables)):
            base = int(math.floor(t["pooling"]))
            frac = t["pooling"] - base
            lens = base + (torch.rand(b, generator=gen) < frac).to(torch.int64)
            idx_parts.append(dlrm_bench.sample_rows(torch, t["distribution"], t["rows"], int(lens.sum()), gen) + first)
            lengths.append(lens)
        lens = torch.cat(lengths)
        offsets = torch.zeros(lens.numel(), dtype=torch.int64)
        offsets[1:] = torch.cumsum(lens, 0)[:-1]
        calls.append((torch.cat(idx_parts).to(device), weight, offsets.to(device)))
    fn = torch.nn.functional.embedding_bag

    def run():
        for indices, weight, offsets in calls:
            fn(indices, weight, offsets, mode="sum")

    for _ in range(warmup):
        run()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        flush.zero_()
        start[i].record()
        run()
        end[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) * 1e-3 for s, e in zip(start, end)]
    del calls
    return wio.percentile(times, 50)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measurements", nargs="+", required=True, help="perfcast profile output (JSON lines)")
    ap.add_argument("--repetitions", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="only the first N forward configs (0: all)")
    ap.add_argument("--device", default="cuda", help="a CUDA device (cuda, cuda:N)")
    ap.add_argument("--out", default="-", help="append JSON lines here (default: standard output)")
    args = ap.parse_args(argv)
    if args.repetitions < 1 or args.warmup < 0 or args.limit < 0:
        ap.error("--repetitions >= 1, --warmup >= 0, --limit >= 0")
    try:
        configs = [(f, n, c) for f in args.measurements for n, c in read_forward_configs(f)]
    except (wio.WorkloadError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.limit:
        configs = configs[: args.limit]
    torch, device = wio.open_torch_device(args.device)
    if torch is None or device.type != "cuda":
        print(f"error: {device if torch is None else 'a CUDA device is needed'}", file=sys.stderr)
        return 1
    gen = torch.Generator().manual_seed(args.seed)
    flush = torch.empty(64 * 1024 * 1024, dtype=torch.float32, device=device)  # 256 MiB > any L2
    prov = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(device),
            "date": wio.utc_now()}
    ratios, skipped = [], 0
    for f, n, cfg in configs:
        try:
            t = time_config(torch, cfg, device, args.repetitions, args.warmup, gen, flush)
        except torch.cuda.OutOfMemoryError:
            t = None
            torch.cuda.empty_cache()
        if t is None:
            skipped += 1
            continue
        ratio = t / cfg["perfcast_s"]
        ratios.append(ratio)
        wio.append_jsonl(args.out, {"schema": "perfcast.pytorch_embedding", "schema_version": "1.0",
                                    "source": f"{f}:{n}", "config": cfg, "perfcast_s": cfg["perfcast_s"],
                                    "torch_s": t, "torch_over_perfcast": ratio, **prov})
    s = summarize(ratios)
    g = s["geomean_torch_over_perfcast"]
    print(f"{s['configs']} configs ({skipped} skipped: out of memory): torch / perfcast geomean "
          f"{g:.3f}, perfcast not slower on {s['perfcast_not_slower']}" if g else "no config timed",
          file=sys.stderr if args.out == "-" else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
