"""Reading perfcast workload files (schema "perfcast.workload" 1.x) without torch.

The same rules as model/graph/workload_spec.cpp (DLRM) and model/graph/transformer_spec.cpp (GPT):
quantities are strings with units ("25MB"), tables may carry "repeat", defaults are the
C++ defaults. Also the index samplers of validation/batch_generator.hpp as scalar
functions (the benchmarks vectorize the same formulas in torch), provenance helpers and
JSON-lines output. Pure python so it can be tested anywhere: python3 -m unittest
validation/pytorch/test_workload_io.py
"""

import datetime
import json
import math
import os
import re

_BYTE_UNITS = {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
               "KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3, "TiB": 1024.0 ** 4}


class WorkloadError(ValueError):
    """Bad input: names the file, the JSON path and what was expected."""

    def __init__(self, file, pointer, message):
        super().__init__(f"{file}: {pointer or '/'}: {message}")


def parse_bytes(text, file="<input>", pointer=""):
    """'25MB' -> 25e6 (decimal and binary prefixes, as core/units.cpp)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]+)\s*", str(text))
    if not m or m.group(2) not in _BYTE_UNITS:
        raise WorkloadError(file, pointer, f'expected a size such as "25MB", got {text!r}')
    return float(m.group(1)) * _BYTE_UNITS[m.group(2)]


def _int(obj, key, file, pointer, lo=1, hi=2 ** 62, default=None):
    if key not in obj:
        if default is None:
            raise WorkloadError(file, f"{pointer}/{key}", "missing required key")
        return default
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or not lo <= v <= hi:
        raise WorkloadError(file, f"{pointer}/{key}", f"expected an integer in [{lo}, {hi}], got {v!r}")
    return int(v)


def _enum(obj, key, choices, default, file, pointer):
    v = obj.get(key, default)
    if v not in choices:
        raise WorkloadError(file, f"{pointer}/{key}", f"expected one of {', '.join(choices)}, got {v!r}")
    return v


def _schema(doc, file):
    if not isinstance(doc, dict):
        raise WorkloadError(file, "", "expected a JSON object")
    if doc.get("schema") != "perfcast.workload":
        raise WorkloadError(file, "/schema", f'expected "perfcast.workload", got {doc.get("schema")!r}')
    if not str(doc.get("schema_version", "")).startswith("1."):
        raise WorkloadError(file, "/schema_version", "expected a 1.x version")


def read_dlrm(doc, file="<input>"):
    """A DLRM workload document -> dict with the tables expanded ("repeat")."""
    _schema(doc, file)
    if doc.get("model") != "dlrm":
        raise WorkloadError(file, "/model", f'expected "dlrm", got {doc.get("model")!r}')
    w = {"name": doc.get("name", ""), "batch_size": _int(doc, "batch_size", file, "", 1, 2 ** 31)}
    for key, least in (("bottom_mlp", 2), ("top_mlp", 1)):
        v = doc.get(key)
        if not isinstance(v, list) or len(v) < least or not all(isinstance(x, int) and x > 0 for x in v):
            raise WorkloadError(file, f"/{key}", f"expected a list of at least {least} positive integers")
        w[key] = list(v)
    if w["top_mlp"][-1] != 1:
        raise WorkloadError(file, "/top_mlp", "the last top MLP layer must have width 1")
    w["interaction"] = _enum(doc, "interaction", ["dot", "cat", "dcn_v2"], "dot", file, "")
    if w["interaction"] == "dcn_v2":
        dcn = doc.get("dcn")
        if not isinstance(dcn, dict):
            raise WorkloadError(file, "/dcn", "missing required object (layers, rank) for interaction dcn_v2")
        w["dcn_layers"] = _int(dcn, "layers", file, "/dcn", 1, 64)
        w["dcn_rank"] = _int(dcn, "rank", file, "/dcn", 1, 2 ** 20)
    w["mlp_dtype"] = _enum(doc, "mlp_dtype", ["fp32", "tf32", "bf16", "fp16"], "fp32", file, "")
    w["dense_optimizer"] = _enum(doc, "dense_optimizer", ["sgd", "adam", "adagrad"], "sgd", file, "")
    w["gradient_bucket"] = parse_bytes(doc.get("gradient_bucket", "25MB"), file, "/gradient_bucket")
    w["sync_each_iteration"] = bool(doc.get("sync_each_iteration", True))
    emb = doc.get("embedding")
    if not isinstance(emb, dict):
        raise WorkloadError(file, "/embedding", "missing required object")
    w["embedding_dtype"] = _enum(emb, "dtype", ["fp32", "fp16", "bf16"], "fp32", file, "/embedding")
    w["index_dtype"] = _enum(emb, "index_dtype", ["int64", "int32"], "int64", file, "/embedding")
    w["embedding_optimizer"] = _enum(emb, "optimizer", ["sgd", "rowwise_adagrad", "adam", "adagrad"], "sgd", file, "/embedding")
    tables = emb.get("tables")
    if not isinstance(tables, list) or not tables:
        raise WorkloadError(file, "/embedding/tables", "expected a non-empty list")
    w["tables"] = []
    for i, t in enumerate(tables):
        at = f"/embedding/tables/{i}"
        spec = {"name": t.get("name", f"t{i}"), "rows": _int(t, "rows", file, at), "dim": _int(t, "dim", file, at, 1, 65536)}
        pooling = t.get("pooling")
        if isinstance(pooling, bool) or not isinstance(pooling, (int, float)) or pooling < 0:
            raise WorkloadError(file, f"{at}/pooling", f"expected a non-negative number, got {pooling!r}")
        spec["pooling"] = float(pooling)
        spec["distribution"] = read_distribution(t.get("distribution"), file, f"{at}/distribution")
        if t.get("sequence", False) is not False:
            raise WorkloadError(file, f"{at}/sequence",
                                "sequence (EmbeddingCollection) tables are predicted by perfcast, not run by this benchmark")
        repeat = _int(t, "repeat", file, at, 1, 100000, default=1)
        if repeat == 1:
            w["tables"].append(spec)
        else:
            for r in range(repeat):
                w["tables"].append(dict(spec, name=f"{spec['name']}_{r}"))
    if w["interaction"] == "dot":
        for t in w["tables"]:
            if t["dim"] != w["bottom_mlp"][-1]:
                raise WorkloadError(file, "/embedding/tables",
                                    f"dot interaction needs every table's dim to equal {w['bottom_mlp'][-1]}; "
                                    f"table {t['name']!r} has dim {t['dim']}")
    return w


def read_distribution(d, file, pointer):
    if not isinstance(d, dict) or d.get("kind") not in ("uniform", "zipf", "hot_set", "reuse_histogram"):
        raise WorkloadError(file, f"{pointer}/kind", "expected uniform, zipf, hot_set or reuse_histogram")
    kind = d["kind"]
    if kind == "zipf":
        return {"kind": kind, "alpha": float(d["alpha"])}
    if kind == "hot_set":
        return {"kind": kind, "hot_rows": float(d["hot_rows"]), "hot_accesses": float(d["hot_accesses"])}
    if kind == "reuse_histogram":
        raise WorkloadError(file, pointer, "a measured reuse histogram defines no sampler (as in the C++ executor)")
    return {"kind": kind}


def read_transformer(doc, file="<input>"):
    """A transformer workload document (model/graph/transformer_spec.cpp's defaults)."""
    _schema(doc, file)
    if doc.get("model") != "transformer":
        raise WorkloadError(file, "/model", f'expected "transformer", got {doc.get("model")!r}')
    w = {"name": doc.get("name", "")}
    w["architecture"] = _enum(doc, "architecture", ["decoder", "encoder", "dit"], "decoder", file, "")
    if w["architecture"] == "dit":
        # A video diffusion transformer: the sequence is the latent video's patches, no vocabulary.
        dit = doc.get("dit")
        if not isinstance(dit, dict):
            raise WorkloadError(file, "/dit", 'expected an object (latent_frames, latent_height, latent_width, ...)')
        frames, height, width = (_int(dit, k, file, "/dit") for k in ("latent_frames", "latent_height", "latent_width"))
        ps = _int(dit, "patch_spatial", file, "/dit", default=2)
        pt = _int(dit, "patch_temporal", file, "/dit", default=1)
        w["seq_len"] = (frames // pt) * (height // ps) * (width // ps)
        w["vocab"] = 0
        keys = ("hidden", "heads", "layers")
    else:
        keys = ("hidden", "heads", "layers", "seq_len", "vocab")
    for key in keys:
        w[key] = _int(doc, key, file, "")
    w["kv_heads"] = _int(doc, "kv_heads", file, "", default=w["heads"])
    explicit_head_dim = "head_dim" in doc
    w["head_dim"] = _int(doc, "head_dim", file, "", default=w["hidden"] // w["heads"])
    w["ffn_hidden"] = _int(doc, "ffn_hidden", file, "", default=4 * w["hidden"])
    w["activation"] = _enum(doc, "activation", ["gelu", "swiglu", "geglu", "relu", "squared_relu"], "gelu", file, "")
    w["position_embedding"] = _enum(doc, "position_embedding", ["learned", "rope"], "learned", file, "")
    w["tied_embeddings"] = bool(doc.get("tied_embeddings", True))
    w["precision"] = _enum(doc, "precision", ["fp32", "tf32", "bf16", "fp16", "fp8"], "bf16", file, "")
    w["micro_batch"] = _int(doc, "micro_batch", file, "", default=1)
    w["global_batch"] = _int(doc, "global_batch", file, "", default=1)
    w["recompute"] = _enum(doc, "recompute", ["none", "selective", "full"], "none", file, "")
    w["attention"] = _enum(doc, "attention", ["flash", "unfused"], "flash", file, "")
    dropout = doc.get("dropout", 0.1)
    if not isinstance(dropout, (int, float)) or not 0 <= dropout <= 0.99:
        raise WorkloadError(file, "/dropout", f"expected a number in [0, 0.99], got {dropout!r}")
    w["dropout"] = float(dropout)
    par = doc.get("parallelism", {})
    w["tp"] = _int(par, "tp", file, "/parallelism", default=1)
    w["pp"] = _int(par, "pp", file, "/parallelism", default=1)
    if not explicit_head_dim and w["hidden"] % w["heads"] != 0:
        raise WorkloadError(file, "/heads", f"hidden {w['hidden']} does not divide into {w['heads']} heads")
    if w["global_batch"] % w["micro_batch"] != 0:
        raise WorkloadError(file, "/global_batch", "global batch is not a multiple of the micro batch")
    return w


def gpt_single_gpu_steps(w, file="<input>"):
    """Micro-batches one GPU runs per iteration (dp = 1): global / micro. Needs tp = pp = 1."""
    if w["tp"] != 1 or w["pp"] != 1:
        raise WorkloadError(file, "/parallelism", f"a single-GPU step needs tp = pp = 1, got tp {w['tp']} pp {w['pp']}")
    return w["global_batch"] // w["micro_batch"]


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise WorkloadError(str(path), "", f"cannot open the file ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise WorkloadError(str(path), "", f"invalid JSON at line {e.lineno}, column {e.colno}") from None


def read_results(path):
    """perfcast validate result lines -> [(line number, line dict)] (schema perfcast.validation_result)."""
    out = []
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise WorkloadError(str(path), "", f"cannot open the file ({e.strerror})") from None
    with f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                j = json.loads(line)
            except json.JSONDecodeError:
                raise WorkloadError(f"{path} line {n}", "", "invalid JSON") from None
            if not isinstance(j, dict) or j.get("schema") != "perfcast.validation_result" or "config" not in j:
                raise WorkloadError(f"{path} line {n}", "/schema", "expected a perfcast.validation_result line with a config")
            out.append((n, j))
    return out


# --- index samplers (validation/batch_generator.hpp RowSampler, scalar form) -------------

def hot_rows(d, rows):
    return max(1, int(round(d["hot_rows"] * rows)))


def sample_row(d, rows, u):
    """Maps u in [0, 1) to a row in [0, rows), as RowSampler::draw does."""
    kind = d["kind"]
    if kind == "uniform":
        return min(rows - 1, int(u * rows))
    if kind == "zipf":
        a = d["alpha"]
        n1 = rows + 1.0
        if abs(a - 1.0) < 1e-12:
            x = n1 ** u
        else:
            x = ((n1 ** (1.0 - a) - 1.0) * u + 1.0) ** (1.0 / (1.0 - a))
        return min(rows - 1, max(0, int(math.floor(x)) - 1))
    if kind == "hot_set":
        h, g = hot_rows(d, rows), d["hot_accesses"]
        if h >= rows:
            r = u * rows
        elif u < g:
            r = u / g * h  # the hot rows 0..h-1 take a share g of the accesses
        else:
            r = h + (u - g) / (1.0 - g) * (rows - h)
        return min(rows - 1, max(0, int(r)))
    raise ValueError(f"no sampler for {kind}")


def bag_length(pooling, u):
    """floor(L) indices plus one with probability frac(L): mean L."""
    base = math.floor(pooling)
    return int(base) + (1 if u < pooling - base else 0)


# --- timing statistics and provenance ---------------------------------------------------

def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    s = sorted(values)
    if not s:
        raise ValueError("no values")
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def timing_summary(iteration_s):
    return {"median_s": percentile(iteration_s, 50), "p10_s": percentile(iteration_s, 10),
            "p90_s": percentile(iteration_s, 90), "iterations": len(iteration_s), "iteration_s": list(iteration_s)}


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def append_jsonl(path, record):
    """Appends one JSON line and flushes (an interrupted run keeps its lines)."""
    if path == "-":
        print(json.dumps(record), flush=True)
        return
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()


def open_torch_device(name):
    """Imports PyTorch and opens device `name` ("cuda", "cuda:1", "cpu").

    Returns (torch, device), or (None, message) when PyTorch is missing or no CUDA device is
    visible; the scripts then print the message and exit 1.
    """
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed (pip install torch)"
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        return None, "no CUDA device visible to PyTorch (use --device cpu for a smoke test)"
    return torch, device
