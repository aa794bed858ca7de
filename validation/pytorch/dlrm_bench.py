#!/usr/bin/env python3
"""PyTorch DLRM equivalent of perfcast's reference executor, for a realism check.

Reads a perfcast DLRM workload (configs/workloads/*.json, or the configs of a
`perfcast validate` result file), builds the same model (nn.EmbeddingBag per table, sum
pooling, sparse gradients and SGD as DLRM's reference code; nn.Linear MLPs with ReLU; dot
or cat interaction; BCE loss), draws batches with the executor's samplers
(validation/batch_generator.hpp) on the host, copies each batch to the GPU every
iteration, and times warm-up + N whole training iterations (host wall clock, ending with
loss.item() and torch.cuda.synchronize()). One GPU: the workload's global batch runs on
one device (compare with the executor's single-GPU runs, e.g. configs/systems/h100_sxm.json).

  dlrm_bench.py --workload configs/workloads/dlrm_default.json --out torch_dlrm.jsonl
  dlrm_bench.py --results validation/results/<gpu>/<name>.jsonl --out torch_dlrm.jsonl
  dlrm_bench.py --workload configs/workloads/dlrm_ddp.json --device cpu --iterations 2   # smoke test

Appends one JSON line per workload (schema "perfcast.pytorch_result") with the median,
p10, p90, every iteration time, and provenance (torch, CUDA, GPU, date).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload_io as wio  # noqa: E402


def sample_rows(torch, d, rows, n, gen):
    """Vectorized RowSampler (workload_io.sample_row): n row indices, int64, on the CPU."""
    u = torch.rand(n, dtype=torch.float64, generator=gen)
    kind = d["kind"]
    if kind == "uniform":
        r = (u * rows).floor()
    elif kind == "zipf":
        a, n1 = d["alpha"], rows + 1.0
        x = n1 ** u if abs(a - 1.0) < 1e-12 else ((n1 ** (1.0 - a) - 1.0) * u + 1.0) ** (1.0 / (1.0 - a))
        r = x.floor() - 1
    else:  # hot_set
        h, g = wio.hot_rows(d, rows), d["hot_accesses"]
        if h >= rows:
            r = (u * rows).floor()
        else:
            r = torch.where(u < g, (u / g * h).floor(), (h + (u - g) / (1.0 - g) * (rows - h)).floor())
    return r.clamp_(0, rows - 1).to(torch.int64)


def make_batch(torch, w, local_batch, gen, pin):
    dense = torch.rand(local_batch, w["bottom_mlp"][0], generator=gen)
    labels = (torch.rand(local_batch, 1, generator=gen) < 0.5).float()
    bags = []
    for t in w["tables"]:
        base = int(t["pooling"])
        frac = t["pooling"] - base
        lengths = base + (torch.rand(local_batch, generator=gen) < frac).to(torch.int64)
        offsets = torch.zeros(local_batch, dtype=torch.int64)
        offsets[1:] = torch.cumsum(lengths, 0)[:-1]
        idx = sample_rows(torch, t["distribution"], t["rows"], int(lengths.sum()), gen)
        if w["index_dtype"] == "int32":
            idx, offsets = idx.to(torch.int32), offsets.to(torch.int32)
        bags.append((idx, offsets))
    batch = {"dense": dense, "labels": labels, "bags": bags}
    if pin:
        batch = {"dense": dense.pin_memory(), "labels": labels.pin_memory(),
                 "bags": [(i.pin_memory(), o.pin_memory()) for i, o in bags]}
    return batch


def to_device(batch, device):
    return {"dense": batch["dense"].to(device, non_blocking=True),
            "labels": batch["labels"].to(device, non_blocking=True),
            "bags": [(i.to(device, non_blocking=True), o.to(device, non_blocking=True)) for i, o in batch["bags"]]}


def build_model(torch, w, device):
    nn = torch.nn

    def mlp(widths, last_relu):
        layers = []
        for i in range(len(widths) - 1):
            layers.append(nn.Linear(widths[i], widths[i + 1], device=device))
            if i < len(widths) - 2 or last_relu:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    emb_dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[w["embedding_dtype"]]

    class Dlrm(nn.Module):
        def __init__(self):
            super().__init__()
            self.bottom = mlp(w["bottom_mlp"], True)
            self.embs = nn.ModuleList()
            for t in w["tables"]:
                e = nn.EmbeddingBag(t["rows"], t["dim"], mode="sum", sparse=True, device=device, dtype=emb_dtype)
                bound = (1.0 / t["rows"]) ** 0.5  # DLRM's uniform(-sqrt(1/n), sqrt(1/n)) init
                nn.init.uniform_(e.weight, -bound, bound)
                self.embs.append(e)
            d = w["bottom_mlp"][-1]
            n = len(w["tables"]) + 1
            if w["interaction"] == "dot":
                width = d + n * (n - 1) // 2
                li, lj = torch.tril_indices(n, n, offset=-1, device=device)
                self.register_buffer("li", li)
                self.register_buffer("lj", lj)
            else:
                width = d + sum(t["dim"] for t in w["tables"])
            if w["interaction"] == "dcn_v2":  # TorchRec's LowRankCrossNet: x_{l+1} = x0 * (W (V x_l) + b) + x_l
                r = w["dcn_rank"]
                self.dcn_v = nn.ModuleList(nn.Linear(width, r, bias=False, device=device) for _ in range(w["dcn_layers"]))
                self.dcn_w = nn.ModuleList(nn.Linear(r, width, bias=True, device=device) for _ in range(w["dcn_layers"]))
            self.top = mlp([width] + w["top_mlp"], False)

        def forward(self, dense, bags):
            x = self.bottom(dense)
            ys = [e(i, o).to(x.dtype) for e, (i, o) in zip(self.embs, bags)]
            if w["interaction"] == "dot":
                t = torch.stack([x] + ys, dim=1)
                z = torch.bmm(t, t.transpose(1, 2))
                r = torch.cat([x, z[:, self.li, self.lj]], dim=1)
            else:
                r = torch.cat([x] + ys, dim=1)
            if w["interaction"] == "dcn_v2":
                x0 = r
                for v, lin in zip(self.dcn_v, self.dcn_w):
                    r = x0 * lin(v(r)) + r
            return self.top(r)

    return Dlrm()


def run_workload(torch, w, args, device):
    torch.manual_seed(args.seed)
    if w["mlp_dtype"] == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
    model = build_model(torch, w, device)
    dense_params = [p for n, p in model.named_parameters() if not n.startswith("embs.")]
    emb_params = [e.weight for e in model.embs]
    lr = 0.01
    if w["dense_optimizer"] == "adam":
        dense_opt = torch.optim.Adam(dense_params, lr=lr)
    elif w["dense_optimizer"] == "adagrad":
        dense_opt = torch.optim.Adagrad(dense_params, lr=lr)
    else:
        dense_opt = torch.optim.SGD(dense_params, lr=lr)
    if w["embedding_optimizer"] == "sgd":
        emb_opt = torch.optim.SGD(emb_params, lr=lr)
    elif w["embedding_optimizer"] == "adam":
        emb_opt = torch.optim.SparseAdam(emb_params, lr=lr)
    else:  # adagrad; rowwise_adagrad: torch has no fused row-wise Adagrad, Adagrad with sparse gradients is closest
        emb_opt = torch.optim.Adagrad(emb_params, lr=lr)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(w["mlp_dtype"])
    gen = torch.Generator().manual_seed(args.seed)
    cuda = device.type == "cuda"
    batches = [make_batch(torch, w, w["batch_size"], gen, cuda) for _ in range(args.batches)]

    def step(k):
        b = to_device(batches[k % len(batches)], device)
        dense_opt.zero_grad(set_to_none=True)
        emb_opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            logits = model(b["dense"], b["bags"])
        loss = loss_fn(logits.float(), b["labels"])
        loss.backward()
        dense_opt.step()
        emb_opt.step()
        return loss.item()  # the host reads the loss every iteration, as the executor does

    losses, times = [], []
    for k in range(args.warmup + args.iterations):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        losses.append(step(k))
        if cuda:
            torch.cuda.synchronize()
        if k >= args.warmup:
            times.append(time.perf_counter() - t0)
    out = wio.timing_summary(times)
    out.update({"first_loss": losses[0], "last_loss": losses[-1]})
    del model, batches
    if cuda:
        torch.cuda.empty_cache()
    return out


def provenance(torch, device):
    p = {"torch": torch.__version__, "cuda": torch.version.cuda or "", "device": device.type,
         "date": wio.utc_now(), "host": os.uname().nodename}
    if device.type == "cuda":
        p["gpu"] = torch.cuda.get_device_name(device)
    return p


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--workload", nargs="+", help="perfcast DLRM workload file(s)")
    src.add_argument("--results", help="a perfcast validate result file (JSON lines): run each line's config")
    ap.add_argument("--index", type=int, nargs="*", help="with --results: only these config indices")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--batches", type=int, default=4, help="distinct pre-generated batches cycled through")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu for a smoke test")
    ap.add_argument("--out", default="-", help="append JSON lines here (default: standard output)")
    args = ap.parse_args(argv)
    if args.iterations < 1 or args.warmup < 0 or args.batches < 1:
        ap.error("--iterations >= 1, --warmup >= 0 and --batches >= 1")

    jobs = []  # (label, workload document, extra fields)
    try:
        if args.workload:
            for f in args.workload:
                doc = wio.load_json(f)
                jobs.append((f, doc, {"source": f}))
        else:
            for n, line in wio.read_results(args.results):
                if args.index and line.get("index") not in args.index:
                    continue
                jobs.append((f"{args.results} #{line.get('index')}", line["config"],
                             {"source": f"{args.results} line {n}", "index": line.get("index"),
                              "perfcast_predicted_s": line.get("predicted_s"),
                              "perfcast_measured_s": line.get("measured_s")}))
        specs = [(label, doc, extra, wio.read_dlrm(doc, label)) for label, doc, extra in jobs]
    except wio.WorkloadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    torch, device = wio.open_torch_device(args.device)
    if torch is None:
        print(f"error: {device}", file=sys.stderr)
        return 1
    prov = provenance(torch, device)
    for label, doc, extra, w in specs:
        r = run_workload(torch, w, args, device)
        record = {"schema": "perfcast.pytorch_result", "schema_version": "1.0", "model": "dlrm", "workload": w["name"],
                  "config": doc, "measured_s": r["median_s"], "warmup": args.warmup, "seed": args.seed, **r, **prov,
                  **extra}
        wio.append_jsonl(args.out, record)
        line = f"{label}: torch median {r['median_s'] * 1e3:.3f} ms (p10 {r['p10_s'] * 1e3:.3f}, p90 {r['p90_s'] * 1e3:.3f})"
        if extra.get("perfcast_measured_s"):
            line += f", perfcast executor {extra['perfcast_measured_s'] * 1e3:.3f} ms"
        if extra.get("perfcast_predicted_s"):
            line += f", predicted {extra['perfcast_predicted_s'] * 1e3:.3f} ms"
        print(line, file=sys.stderr if args.out == "-" else sys.stdout, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
