"""perfcast plans as TorchRec objects.

:func:`plan_entries` turns a plan (a ``perfcast.shard`` result, a plan dict in perfcast's
flat format or TorchRec's shape, or a plan file) into TorchRec's shape as plain dicts:
``{module_path: {table: {"sharding_type", "compute_kernel", "ranks", "sharding_spec"}}}``,
plus ``"cache_params": {"algorithm": "lru", "load_factor": f}`` for fused_uvm_caching tables.
:func:`to_sharding_plan` builds ``torchrec.distributed.types.ShardingPlan`` from it, with
``ParameterSharding`` per table and ``EnumerableShardingSpec`` / ``ShardMetadata`` per
shard, when torchrec is importable; otherwise it raises ImportError saying so.
"""

import json as _json
import os as _os

#: TorchRec's DLRM model keeps its tables here (torchrec.models.dlrm.DLRM).
DLRM_MODULE = "sparse_arch.embedding_bag_collection"


def _plan_dict(result):
    if isinstance(result, (str, _os.PathLike)):
        with open(result) as f:
            return _json.load(f)
    if not isinstance(result, dict):
        raise TypeError("expected a perfcast.shard result, a plan dict or a plan file, got %s" % type(result).__name__)
    if "best" in result and isinstance(result["best"], dict) and "plan" in result["best"]:
        return result["best"]["plan"]
    return result


def _flat_entry(name, t):
    kind = t["sharding_type"]
    entry = {"sharding_type": "grid_shard" if kind == "grid" else kind,
             "compute_kernel": t.get("compute_kernel", "dense" if kind == "data_parallel" else "fused"),
             "ranks": list(t["ranks"])}
    if t.get("cache_params") is not None:
        entry["cache_params"] = dict(t["cache_params"])
    if kind == "data_parallel":
        entry["sharding_spec"] = None
        return entry
    if "sharding_spec" not in t:
        raise ValueError("table %r has no sharding_spec; write the plan with perfcast (shard --out) to get one" % name)
    entry["sharding_spec"] = {"shards": [dict(s) for s in t["sharding_spec"]]}
    return entry


def plan_entries(result, module_path=DLRM_MODULE):
    """TorchRec's plan shape as plain dicts (no torchrec needed)."""
    plan = _plan_dict(result)
    if "schema" in plan or "tables" in plan:
        return {module_path: {name: _flat_entry(name, t) for name, t in plan["tables"].items()}}
    return {module: {name: dict(t) for name, t in tables.items()} for module, tables in plan.items()}


def to_sharding_plan(result, module_path=DLRM_MODULE):
    """``torchrec.distributed.types.ShardingPlan`` for the plan; ImportError without torchrec."""
    try:
        from torch.distributed._shard.metadata import ShardMetadata
        from torch.distributed._shard.sharding_spec import EnumerableShardingSpec
        from torchrec.distributed.types import CacheParams, EmbeddingModuleShardingPlan, ParameterSharding, ShardingPlan
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import CacheAlgorithm
    except ImportError as e:
        raise ImportError("perfcast.torchrec.to_sharding_plan needs torch and torchrec (pip install torchrec); "
                          "perfcast.torchrec.plan_entries gives the same plan as dicts without them (%s)" % e) from None
    modules = {}
    for module, tables in plan_entries(result, module_path).items():
        shardings = EmbeddingModuleShardingPlan()
        for name, t in tables.items():
            spec = None
            if t.get("sharding_spec"):
                spec = EnumerableShardingSpec([
                    ShardMetadata(shard_offsets=list(s["shard_offsets"]), shard_sizes=list(s["shard_sizes"]),
                                  placement=s["placement"]) for s in t["sharding_spec"]["shards"]])
            cache = None
            if t.get("cache_params"):
                cache = CacheParams(algorithm=CacheAlgorithm.LRU, load_factor=t["cache_params"].get("load_factor"))
            shardings[name] = ParameterSharding(sharding_type=t["sharding_type"], compute_kernel=t["compute_kernel"],
                                                ranks=t.get("ranks"), sharding_spec=spec, cache_params=cache)
        modules[module] = shardings
    return ShardingPlan(plan=modules)
