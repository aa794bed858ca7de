#!/usr/bin/env python3
"""Single-GPU GPT training step in PyTorch, timed like perfcast's executor.

Reads a perfcast transformer workload (configs/workloads/gpt2.json, ...; tp = pp = 1),
builds the model Megatron-style (token + learned position embeddings or RoPE, pre-LayerNorm
blocks: fused QKV, causal attention through F.scaled_dot_product_attention (flash when
"attention": "flash"), GELU or SwiGLU MLP of width ffn_hidden, dropout, final LayerNorm, LM
head tied to the embedding when "tied_embeddings"), vocabulary padded to a multiple of 128
as Megatron does, AdamW, precision by autocast (bf16/fp16; fp32 master weights), full
recompute by torch.utils.checkpoint per layer ("selective" runs as "none": with flash attention
there are no attention scores to recompute). One iteration = global_batch / micro_batch
micro-batches (dp = 1) with gradient accumulation, then the optimizer step and loss.item().
Warm-up + N iterations, each timed on the host with torch.cuda.synchronize().

  gpt_bench.py --workload configs/workloads/gpt2.json --global-batch 32 --out torch_gpt.jsonl
  gpt_bench.py --workload configs/workloads/gpt2.json --device cpu --layers 2 --seq-len 64 \
               --micro-batch 2 --global-batch 2 --iterations 1 --warmup 0          # smoke test

Appends one JSON line (schema "perfcast.pytorch_result", "model": "transformer") with the
workload as run ("config", overrides applied, so `perfcast validate --compare` predicts
exactly what ran), median / p10 / p90 and provenance.
"""

import argparse
import copy
import importlib
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload_io as wio  # noqa: E402


def build_model(torch, w, device):
    nn, F = torch.nn, torch.nn.functional
    checkpoint = importlib.import_module("torch.utils.checkpoint").checkpoint if w["recompute"] == "full" else None
    h, heads, kv_heads = w["hidden"], w["heads"], w["kv_heads"]
    hd = w["head_dim"]  # hidden // heads unless the workload states "head_dim"
    ffn = w["ffn_hidden"]
    vocab = int(math.ceil(w["vocab"] / 128.0) * 128)  # Megatron --make-vocab-size-divisible-by 128 (tp = 1)
    p_drop = w["dropout"]
    causal = w["architecture"] == "decoder"
    flash = w["attention"] == "flash"

    def rope(x):  # x: (B, heads, S, hd)
        s = x.shape[-2]
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=x.device, dtype=torch.float32) / hd))
        ang = torch.outer(torch.arange(s, device=x.device, dtype=torch.float32), inv)
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(h, device=device)
            self.qkv = nn.Linear(h, (heads + 2 * kv_heads) * hd, device=device)
            self.proj = nn.Linear(heads * hd, h, device=device)
            self.ln2 = nn.LayerNorm(h, device=device)
            gate = 2 if w["activation"] in ("swiglu", "geglu") else 1
            self.fc1 = nn.Linear(h, gate * ffn, device=device)
            self.fc2 = nn.Linear(ffn, h, device=device)
            self.drop = nn.Dropout(p_drop)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split([heads * hd, kv_heads * hd, kv_heads * hd], dim=-1)
            q = q.view(b, s, heads, hd).transpose(1, 2)
            k = k.view(b, s, kv_heads, hd).transpose(1, 2)
            v = v.view(b, s, kv_heads, hd).transpose(1, 2)
            if w["position_embedding"] == "rope":
                q, k = rope(q), rope(k)
            if kv_heads != heads:
                k = k.repeat_interleave(heads // kv_heads, dim=1)
                v = v.repeat_interleave(heads // kv_heads, dim=1)
            drop = p_drop if self.training else 0.0
            if flash:
                a = F.scaled_dot_product_attention(q, k, v, dropout_p=drop, is_causal=causal)
            else:  # unfused: explicit scores, mask, softmax, dropout
                sc = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
                if causal:
                    sc = sc.masked_fill(torch.ones(s, s, device=x.device, dtype=torch.bool).triu(1), float("-inf"))
                a = F.dropout(sc.softmax(-1), drop, self.training) @ v
            x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, s, heads * hd)))
            u = self.fc1(self.ln2(x))
            if w["activation"] in ("swiglu", "geglu"):
                g, u = u.chunk(2, dim=-1)
                u = (F.silu(g) if w["activation"] == "swiglu" else F.gelu(g)) * u
            elif w["activation"] == "relu":
                u = F.relu(u)
            elif w["activation"] == "squared_relu":  # Nemotron-4's activation
                u = F.relu(u).square()
            else:
                u = F.gelu(u)
            return x + self.drop(self.fc2(u))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, h, device=device)
            self.pos = nn.Embedding(w["seq_len"], h, device=device) if w["position_embedding"] == "learned" else None
            self.drop = nn.Dropout(p_drop)
            self.blocks = nn.ModuleList(Block() for _ in range(w["layers"]))
            self.ln_f = nn.LayerNorm(h, device=device)
            self.head = None if w["tied_embeddings"] else nn.Linear(h, vocab, bias=False, device=device)

        def forward(self, tokens):
            x = self.tok(tokens)
            if self.pos is not None:
                x = x + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
            x = self.drop(x)
            for blk in self.blocks:
                if w["recompute"] == "full" and self.training:
                    x = checkpoint(blk, x, use_reentrant=False)
                else:
                    x = blk(x)
            x = self.ln_f(x)
            return x @ self.tok.weight.t() if self.head is None else self.head(x)

    return Gpt(), vocab


def run(torch, w, args, device):
    torch.manual_seed(args.seed)
    if w["precision"] == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
    model, vocab = build_model(torch, w, device)
    model.train()
    cuda = device.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if cuda else {}))
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16}.get(w["precision"])
    scaler = torch.amp.GradScaler(device.type, enabled=w["precision"] == "fp16")
    steps = wio.gpt_single_gpu_steps(w)
    gen = torch.Generator().manual_seed(args.seed)
    # Tokens of a few micro-batches, drawn uniformly (the timing does not depend on values).
    pool = [torch.randint(0, w["vocab"], (w["micro_batch"], w["seq_len"] + 1), generator=gen) for _ in range(4)]
    if cuda:
        pool = [t.pin_memory() for t in pool]

    def iteration():
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for m in range(steps):
            t = pool[m % len(pool)].to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
                logits = model(t[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.float().view(-1, vocab), t[:, 1:].reshape(-1)) / steps
            scaler.scale(loss).backward()
            total = total + loss.detach()
        scaler.step(opt)
        scaler.update()
        return float(total)  # loss.item(): the host waits for the iteration

    losses, times = [], []
    for k in range(args.warmup + args.iterations):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        losses.append(iteration())
        if cuda:
            torch.cuda.synchronize()
        if k >= args.warmup:
            times.append(time.perf_counter() - t0)
    out = wio.timing_summary(times)
    out.update({"first_loss": losses[0], "last_loss": losses[-1], "micro_batches": steps,
                "parameters": sum(p.numel() for p in model.parameters())})
    if cuda:
        out["max_memory_bytes"] = torch.cuda.max_memory_allocated(device)
    return out


def apply_overrides(doc, args):
    """Returns a copy of the workload document with the command-line size overrides."""
    d = copy.deepcopy(doc)
    for key, value in (("layers", args.layers), ("seq_len", args.seq_len), ("micro_batch", args.micro_batch),
                       ("global_batch", args.global_batch)):
        if value is not None:
            d[key] = value
    d["parallelism"] = {"tp": 1, "pp": 1, "dp": 1}
    return d


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", required=True, help="perfcast transformer workload file")
    ap.add_argument("--layers", type=int, help="override the layer count (smaller runs)")
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--micro-batch", type=int)
    ap.add_argument("--global-batch", type=int, help="sequences per iteration (micro-batches = global / micro)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu for a smoke test")
    ap.add_argument("--out", default="-", help="append JSON lines here (default: standard output)")
    args = ap.parse_args(argv)
    if args.iterations < 1 or args.warmup < 0:
        ap.error("--iterations >= 1 and --warmup >= 0")
    try:
        doc = apply_overrides(wio.load_json(args.workload), args)
        w = wio.read_transformer(doc, args.workload)
        if w["architecture"] == "dit":
            raise wio.WorkloadError(args.workload, "/architecture", "this reference runs GPT and BERT layers; a diffusion "
                                    "transformer (\"dit\") has no reference run here")
        wio.gpt_single_gpu_steps(w, args.workload)
    except wio.WorkloadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    torch, device = wio.open_torch_device(args.device)
    if torch is None:
        print(f"error: {device}", file=sys.stderr)
        return 1
    r = run(torch, w, args, device)
    record = {"schema": "perfcast.pytorch_result", "schema_version": "1.0", "model": "transformer", "workload": w["name"],
              "source": args.workload, "config": doc, "measured_s": r["median_s"], "warmup": args.warmup,
              "seed": args.seed, **r, "torch": torch.__version__, "cuda": torch.version.cuda or "",
              "device": device.type, "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "",
              "date": wio.utc_now(), "host": os.uname().nodename}
    wio.append_jsonl(args.out, record)
    print(f"{args.workload}: {r['micro_batches']} micro-batches/iteration, torch median {r['median_s'] * 1e3:.3f} ms "
          f"(p10 {r['p10_s'] * 1e3:.3f}, p90 {r['p90_s'] * 1e3:.3f})", file=sys.stderr if args.out == "-" else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
