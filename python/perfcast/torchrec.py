"""perfcast plans as TorchRec objects, and TorchRec's plans as perfcast reads them.

:func:`plan_entries` turns a plan (a ``perfcast.shard`` result, a plan dict in perfcast's
flat format or TorchRec's shape, the output of TorchRec's ``ShardingPlan._serialize()``, or a
plan file) into TorchRec's ParameterSharding shape as plain dicts:
``{module_path: {table: {"sharding_type", "compute_kernel", "ranks", "sharding_spec", ...}}}``,
with ``"cache_params": {"algorithm": "LRU", "load_factor": f}`` for fused_uvm_caching
tables and every other ParameterSharding field kept as given. :func:`to_sharding_plan`
builds ``torchrec.distributed.types.ShardingPlan`` from it, with ``ParameterSharding`` per
table (enums as TorchRec's and FBGEMM's enum members) and ``EnumerableShardingSpec`` /
``ShardMetadata`` per shard, when torchrec is importable; otherwise it raises ImportError
saying so. A plan that is not one of these shapes raises :class:`perfcast.ConfigError`
naming the path of the bad entry (e.g. ``/plan/sparse_arch.embedding_bag_collection/t0``).
"""

import json as _json
import os as _os

from . import ConfigError

#: TorchRec's DLRM model keeps its tables here (torchrec.models.dlrm.DLRM).
DLRM_MODULE = "sparse_arch.embedding_bag_collection"


def _fail(path, message):
    raise ConfigError("<plan>: %s: %s" % (path or "/", message), "<plan>", path)


def _is_serialized(plan):
    """ShardingPlan._serialize()'s {"plan": {module: {table: {...}}}}."""
    if not isinstance(plan, dict) or set(plan) != {"plan"} or not isinstance(plan["plan"], dict):
        return False
    return all(isinstance(tables, dict) and all(isinstance(t, dict) for t in tables.values())
               for tables in plan["plan"].values())


def _plan_dict(result):
    """(plan dict, JSON pointer prefix of its modules)."""
    if isinstance(result, (str, _os.PathLike)):
        with open(result) as f:
            result = _json.load(f)
    if not isinstance(result, dict):
        raise TypeError("expected a perfcast.shard result, a plan dict or a plan file, got %s" % type(result).__name__)
    if "best" in result and isinstance(result["best"], dict) and "plan" in result["best"]:
        return result["best"]["plan"], ""
    if _is_serialized(result):
        return result["plan"], "/plan"
    return result, ""


def _flat_entry(name, t, path):
    if not isinstance(t, dict) or "sharding_type" not in t or "ranks" not in t:
        _fail(path, "expected a table with \"sharding_type\" and \"ranks\"")
    kind = t["sharding_type"]
    entry = {"sharding_type": "grid_shard" if kind == "grid" else kind,
             "compute_kernel": t.get("compute_kernel", "dense" if kind == "data_parallel" else "fused"),
             "ranks": list(t["ranks"])}
    if t.get("cache_params") is not None:
        entry["cache_params"] = dict(t["cache_params"])
    if t.get("output_dtype") is not None:
        entry["output_dtype"] = t["output_dtype"]  # modelled: the pooled output's type
    if kind == "data_parallel":
        entry["sharding_spec"] = None
        return entry
    if "sharding_spec" not in t:
        _fail(path, "table %r has no sharding_spec; write the plan with perfcast (shard --out) to get one" % name)
    entry["sharding_spec"] = {"shards": [dict(s) for s in t["sharding_spec"]]}
    return entry


def _torchrec_entry(t, path):
    """A table of TorchRec's shape, its shards under "sharding_spec" (as ParameterSharding
    holds them) whether they came as _serialize()'s "shards" or so; other fields unchanged."""
    if not isinstance(t, dict) or "sharding_type" not in t:
        _fail(path, "expected ParameterSharding fields (\"sharding_type\", \"compute_kernel\", \"ranks\", ...)")
    entry = dict(t)
    if "shards" in entry:
        if entry.get("sharding_spec") is not None:
            _fail(path + "/shards", "give the shards once: as \"shards\" (ShardingPlan._serialize) or in \"sharding_spec\"")
        shards = entry.pop("shards")
        entry["sharding_spec"] = {"shards": [dict(s) for s in shards]} if shards is not None else None
    entry.setdefault("sharding_spec", None)
    return entry


def plan_entries(result, module_path=DLRM_MODULE):
    """TorchRec's plan shape as plain dicts (no torchrec needed)."""
    plan, prefix = _plan_dict(result)
    if "schema" in plan or "tables" in plan:
        return {module_path: {name: _flat_entry(name, t, "/tables/" + name) for name, t in plan["tables"].items()}}
    out = {}
    for module, tables in plan.items():
        if not isinstance(tables, dict):
            _fail("%s/%s" % (prefix, module), "expected a module path mapping table names to ParameterSharding fields")
        out[module] = {name: _torchrec_entry(t, "%s/%s/%s" % (prefix, module, name)) for name, t in tables.items()}
    return out


def _member(enum, value, path):
    """An enum member from its name ("LRU"), its value (0, "FP16") or Python's str() of it."""
    if value is None or isinstance(value, enum):
        return value
    if isinstance(value, str):
        name = value.split(".", 1)[1] if value.startswith(enum.__name__ + ".") else value
        if name in enum.__members__:
            return enum[name]
    try:
        return enum(value)
    except ValueError:
        _fail(path, "expected a %s (%s), got %r" % (enum.__name__, ", ".join(enum.__members__), value))


def to_sharding_plan(result, module_path=DLRM_MODULE):
    """``torchrec.distributed.types.ShardingPlan`` for the plan; ImportError without torchrec."""
    try:
        from torch.distributed._shard.metadata import ShardMetadata
        from torch.distributed._shard.sharding_spec import EnumerableShardingSpec
        from torchrec.distributed.types import (CacheParams, EmbeddingModuleShardingPlan, KeyValueParams, ParameterSharding,
                                                ShardingPlan)
        from torchrec.types import DataType
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode, CacheAlgorithm
    except ImportError as e:
        raise ImportError("perfcast.torchrec.to_sharding_plan needs torch and torchrec (pip install torchrec); "
                          "perfcast.torchrec.plan_entries gives the same plan as dicts without them (%s)" % e) from None
    modules = {}
    for module, tables in plan_entries(result, module_path).items():
        shardings = EmbeddingModuleShardingPlan()
        for name, t in tables.items():
            path = "/%s/%s" % (module, name)
            spec = None
            if t.get("sharding_spec"):
                try:
                    spec = EnumerableShardingSpec([
                        ShardMetadata(shard_offsets=list(s["shard_offsets"]), shard_sizes=list(s["shard_sizes"]),
                                      placement=s["placement"]) for s in t["sharding_spec"]["shards"]])
                except (KeyError, TypeError) as e:
                    _fail(path + "/sharding_spec", "expected shards with shard_offsets, shard_sizes and placement (%s)" % e)
            cache = None
            if t.get("cache_params"):
                c = dict(t["cache_params"])
                c["algorithm"] = _member(CacheAlgorithm, c.get("algorithm"), path + "/cache_params/algorithm")
                c["precision"] = _member(DataType, c.get("precision"), path + "/cache_params/precision")
                cache = CacheParams(**{k: v for k, v in c.items() if v is not None})
            kv = t.get("key_value_params")
            shardings[name] = ParameterSharding(
                sharding_type=t["sharding_type"], compute_kernel=t.get("compute_kernel"), ranks=t.get("ranks"),
                sharding_spec=spec, cache_params=cache, enforce_hbm=t.get("enforce_hbm"),
                stochastic_rounding=t.get("stochastic_rounding"),
                bounds_check_mode=_member(BoundsCheckMode, t.get("bounds_check_mode"), path + "/bounds_check_mode"),
                output_dtype=_member(DataType, t.get("output_dtype"), path + "/output_dtype"),
                key_value_params=KeyValueParams(**kv) if isinstance(kv, dict) else kv)
        modules[module] = shardings
    return ShardingPlan(plan=modules)


#: TorchRec's planner assumes this many indices per sample for a feature whose
#: ParameterConstraints give no pooling_factors (torchrec/distributed/planner/constants.py,
#: POOLING_FACTOR).
DEFAULT_POOLING_FACTOR = 1.0

_DTYPES = {"FP32": "fp32", "FP16": "fp16", "BF16": "bf16"}


def _field(obj, name, default=None):
    """A field of a TorchRec dataclass object or of a dict with the same keys."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _bad(path, message):
    raise ConfigError("<torchrec model>: %s: %s" % (path or "/", message), "<torchrec model>", path)


def _enum_name(value):
    """DataType.FP16 / "DataType.FP16" / "FP16" -> "FP16"."""
    name = getattr(value, "name", None) or str(value)
    return name.split(".")[-1]


def workload_from_torchrec(tables, base, constraints=None, batch_size=None, name=None):
    """A perfcast DLRM workload dict from a TorchRec model description.

    ``tables``: EmbeddingBagConfig objects, or dicts with their fields (``name``,
    ``num_embeddings``, ``embedding_dim``, ``feature_names``, ``data_type``, ``pooling``).
    ``constraints``: {table name: ParameterConstraints object or dict}; its
    ``pooling_factors`` (one per feature) give the indices per sample, TorchRec's planner
    default (1.0) otherwise. ``base``: a DLRM workload (path or dict) whose dense part,
    optimizer and batch are kept and whose tables are replaced; ``batch_size`` overrides its
    global batch. TorchRec's description has no index distribution: the tables are uniform
    (set ``distribution`` from ``perfcast index-stats --as-distribution`` for skewed data).
    A table shared by several features, or tables of different data types, raise
    :class:`perfcast.ConfigError` naming the table (perfcast models one bag per table and
    sample, and one embedding precision)."""
    if isinstance(base, (str, _os.PathLike)):
        with open(base) as f:
            workload = _json.load(f)
    elif isinstance(base, dict):
        workload = _json.loads(_json.dumps(base))
    else:
        raise TypeError("base: expected a DLRM workload path or dict, got %s" % type(base).__name__)
    if workload.get("model", "dlrm") != "dlrm" or "embedding" not in workload:
        _bad("/model", "base: expected a DLRM workload (model \"dlrm\" with an \"embedding\" section)")
    constraints = constraints or {}
    out_tables, dtypes = [], set()
    for i, t in enumerate(tables):
        path = "/tables/%d" % i
        table = _field(t, "name")
        rows, dim = _field(t, "num_embeddings"), _field(t, "embedding_dim")
        if not isinstance(table, str) or not table:
            _bad(path + "/name", "expected the table's name")
        for value, key in ((rows, "num_embeddings"), (dim, "embedding_dim")):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                _bad("%s/%s" % (path, key), "expected a positive integer, got %r" % (value,))
        features = list(_field(t, "feature_names", None) or [table])
        if len(features) != 1:
            _bad(path + "/feature_names", "table %s is shared by %d features (%s): perfcast models one bag per table and "
                  "sample; give each feature its own table" % (table, len(features), ", ".join(map(str, features))))
        c = constraints.get(table)
        factors = _field(c, "pooling_factors", None) if c is not None else None
        pooling = float(factors[0]) if factors else DEFAULT_POOLING_FACTOR
        if not pooling > 0:
            _bad("/constraints/%s/pooling_factors" % table, "expected a positive pooling factor, got %r" % (pooling,))
        data_type = _enum_name(_field(t, "data_type", "FP32"))
        if data_type not in _DTYPES:
            _bad(path + "/data_type", "data type %s is not modelled (FP32, FP16, BF16)" % data_type)
        dtypes.add(_DTYPES[data_type])
        out_tables.append({"name": table, "rows": rows, "dim": dim, "pooling": pooling, "distribution": {"kind": "uniform"}})
    if not out_tables:
        _bad("/tables", "expected at least one table")
    if len(dtypes) > 1:
        _bad("/tables", "tables of different data types (%s): perfcast models one embedding precision" % ", ".join(sorted(dtypes)))
    workload["embedding"]["tables"] = out_tables
    workload["embedding"]["dtype"] = dtypes.pop()
    if batch_size is not None:
        workload["batch_size"] = int(batch_size)
    if name is not None:
        workload["name"] = str(name)
    sources = workload.setdefault("sources", {})
    sources["embedding"] = ("TorchRec model description: %d EmbeddingBagConfig tables (rows, dim, data type); indices per "
                            "sample from ParameterConstraints.pooling_factors, TorchRec's planner default %.1f where none; "
                            "index distribution uniform (the description has none)" % (len(out_tables), DEFAULT_POOLING_FACTOR))
    return workload


def _system_document(base):
    """(system dict, folder its relative names resolve against) of a path or dict."""
    if isinstance(base, (str, _os.PathLike)):
        with open(base) as f:
            return _json.load(f), _os.path.dirname(_os.path.abspath(_os.fspath(base)))
    if isinstance(base, dict):
        return _json.loads(_json.dumps(base)), _os.getcwd()
    raise TypeError("base: expected a perfcast system path or dict, got %s" % type(base).__name__)


def _topology_capacity(topology, key):
    """hbm_cap / ddr_cap of a Topology: from its devices' storage (every device the same;
    perfcast models one GPU type per system), or the constructor's keyword in a dict.
    None when absent."""
    devices = _field(topology, "devices", None)
    if devices:
        caps = {getattr(getattr(d, "storage", None), key[:3], None) if not isinstance(d, dict)
                else (d.get("storage") or {}).get(key[:3]) for d in devices}
        if len(caps) > 1:
            _bad("/devices", "devices of different %s capacities (%s): perfcast models one GPU type per system"
                 % (key[:3].upper(), ", ".join(str(c) for c in sorted(caps, key=str))))
        return caps.pop()
    return _field(topology, key, None)


def system_from_torchrec(topology, base, name=None):
    """A perfcast system dict from a TorchRec planner ``Topology`` (the object, or a dict
    of its constructor's keywords: ``world_size``, ``compute_device``, ``hbm_cap``,
    ``ddr_cap``, ``local_world_size``, ...).

    ``base``: a perfcast system (path or dict) of the same GPU and fabric: its GPU, NVLink,
    network and CPU are kept. The topology gives the shape (``local_world_size`` GPUs per
    node, ``world_size / local_world_size`` nodes), each GPU's memory (``hbm_cap``, bytes)
    and the host memory (``ddr_cap`` per GPU, bytes, times the GPUs per node). TorchRec's
    bandwidths (``intra_host_bw``, ``inter_host_bw``, ``hbm_mem_bw``, ``ddr_mem_bw``) are
    its planner's cost-model constants, not the machine's: they are recorded in the system's
    sources and not used (perfcast's collective and kernel models use the base's fabric and
    GPU). A CPU topology, a world size that is not a multiple of the local world size, or
    devices of different capacities raise :class:`perfcast.ConfigError` naming the field."""
    system, folder = _system_document(base)
    if system.get("schema") != "perfcast.system":
        _bad("/schema", "base: expected a perfcast system (schema \"perfcast.system\")")
    device = _field(topology, "compute_device", "cuda")
    if device != "cuda":
        _bad("/compute_device", "compute_device %r: perfcast predicts GPU training (\"cuda\")" % (device,))
    world = _field(topology, "world_size", None)
    local = _field(topology, "local_world_size", None) or world
    for value, key in ((world, "world_size"), (local, "local_world_size")):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            _bad("/" + key, "expected a positive integer, got %r" % (value,))
    if world % local:
        _bad("/world_size", "world_size %d is not a multiple of local_world_size %d (GPUs per node)" % (world, local))
    gpu = system.get("gpu")
    if isinstance(gpu, str):  # another system file whose GPU this one uses
        referenced, _ = _system_document(_os.path.join(folder, gpu))
        gpu = referenced.get("gpu")
    if not isinstance(gpu, dict):
        _bad("/gpu", "base: expected the system's GPU (an object, or the name of a system file with one)")
    gpu = dict(gpu)
    hbm, ddr = _topology_capacity(topology, "hbm_cap"), _topology_capacity(topology, "ddr_cap")
    recorded = []
    for value, key in ((hbm, "hbm_cap"), (ddr, "ddr_cap")):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            _bad("/" + key, "expected bytes (a positive integer), got %r" % (value,))
    if hbm is not None:
        gpu["memory"] = "%dB" % hbm
        recorded.append("hbm_cap %d B per GPU" % hbm)
    system["gpu"] = gpu
    system["gpus_per_node"] = local
    system["nodes"] = world // local
    if ddr is not None:
        host = dict(system.get("host_memory") or {})
        host["capacity"] = "%dB" % (ddr * local)
        system["host_memory"] = host
        recorded.append("ddr_cap %d B per GPU (host memory %d B per node)" % (ddr, ddr * local))
    unused = ["%s=%s" % (k, _field(topology, k)) for k in ("intra_host_bw", "inter_host_bw", "hbm_mem_bw", "ddr_mem_bw")
              if _field(topology, k, None) is not None]
    system["name"] = name if name is not None else "%s (TorchRec topology: %d x %d GPUs)" % (system.get("name", "system"),
                                                                                              world // local, local)
    sources = system.setdefault("sources", {})
    sources["topology"] = ("TorchRec planner Topology: world_size %d, local_world_size %d%s; GPU, NVLink, network and CPU from "
                           "the base system%s" % (world, local, "; " + "; ".join(recorded) if recorded else "",
                                                  "; TorchRec's cost-model bandwidths recorded, not used: " + ", ".join(unused)
                                                  if unused else ""))
    # A system read from a dict resolves its calibration files against config_dir; keep the
    # base's folder for them.
    if isinstance(base, (str, _os.PathLike)) and isinstance(system.get("collective_calibration"), str):
        system["collective_calibration"] = _os.path.join(folder, system["collective_calibration"])
    return system
