"""perfcast from Python: the command line's predictions as dicts.

Each function runs the same C++ code as the ``perfcast`` command and returns the dict
that the command writes with ``--json`` (the same ``context`` block first). Configurations
are file paths or dicts shaped like the files; what-if overrides are a dict mapping the
command line's ``--set`` paths (``"workload.batch_size"``, ``"system.nodes"``,
``"workload.embedding.tables[0].rows"``) to values. Bad input raises
:class:`ConfigError`, which carries the file and the JSON path. The GIL is released while
the C++ code runs (simulation, sharding search, trace reading), so threads may run
predictions in parallel. Every function takes ``timeout=`` (seconds, or a duration such as
"30s"; None: no limit): a search (``shard``, ``plan``) then returns what it found in time,
and other work not finished in time raises the built-in :class:`TimeoutError`.

See docs/python.md.
"""

import json as _json
import os as _os


class ConfigError(ValueError):
    """Bad input: ``file`` names the file (or the argument), ``path`` the JSON pointer."""

    def __init__(self, message, file="", path=""):
        super().__init__(message)
        self.file = file
        self.path = path


class SimulationError(RuntimeError):
    """A workload whose execution graph cannot run (e.g. a deadlock)."""


from . import _perfcast  # noqa: E402  (the translator above needs the classes first)

__all__ = ["ConfigError", "SimulationError", "predict", "predict_text", "comm", "shard", "convert_plan", "plan", "import_trace", "replay", "trace_stats",
           "index_stats", "kernels", "report"]


def _document(value, kind, config_dir):
    """(label, text) for the C++ side: a path is read there; a dict is sent as JSON text
    labelled ``<config_dir>/<kind dict>`` so that errors name it and relative file names
    inside it (a system's "gpu": "h100_sxm.json") resolve against ``config_dir``."""
    if isinstance(value, (str, _os.PathLike)):
        return _os.fspath(value), None
    if isinstance(value, dict):
        label = _os.path.join(_os.fspath(config_dir) if config_dir is not None else ".", "<%s dict>" % kind)
        try:
            text = _json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ConfigError("%s: /: not JSON: %s" % (label, e), label, "") from None
        return label, text
    raise TypeError("%s: expected a file path or a dict, got %s" % (kind, type(value).__name__))


def _override_texts(overrides):
    """{"workload.batch_size": 4096} -> ["workload.batch_size=4096"], as --set takes them.
    Strings go as the command line passes them (e.g. "system.gpu": "h200.json"); other
    values as JSON (numbers, booleans, lists, dicts)."""
    if overrides is None:
        return []
    if not isinstance(overrides, dict):
        raise TypeError("overrides: expected a dict of PATH -> value, got %s" % type(overrides).__name__)
    out = []
    for path, value in overrides.items():
        if not isinstance(path, str):
            raise TypeError("overrides: keys are paths such as \"workload.batch_size\", got %r" % (path,))
        if not isinstance(value, str):
            try:
                value = _json.dumps(value, allow_nan=False)
            except ValueError as e:  # NaN or an infinity; TypeError (not JSON) passes through
                raise ConfigError("--set %s: %s" % (path, e), "--set " + path, "") from None
        out.append("%s=%s" % (path, value))
    return out


def _integer(value, name):
    """An integer argument: a value of another type (a bool, a string, a list) is a
    TypeError; a float that is not a whole number, or an integer beyond 64 bits, is bad
    input (ConfigError)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s: expected an integer, got %s" % (name, type(value).__name__))
    if isinstance(value, float) and not value.is_integer():
        raise ConfigError("%s: expected an integer, got %r" % (name, value), name, "")
    value = int(value)
    if not -2**63 <= value < 2**63:
        raise ConfigError("%s: expected an integer of at most 64 bits, got %d" % (name, value), name, "")
    return value


def _list(values, name):
    if isinstance(values, (bytes, dict)) or not hasattr(values, "__iter__"):
        raise TypeError("%s: expected a list, got %s" % (name, type(values).__name__))
    return list(values)


def _integers(values, name):
    """A list of integers (None: empty)."""
    if values is None:
        return []
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise TypeError("%s: expected a list of integers, got %s" % (name, type(values).__name__))
    return [_integer(v, name) for v in values]


def _seconds(value, name):
    """Seconds as a number (0 where the argument allows none); NaN is bad input."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s: expected seconds, got %s" % (name, type(value).__name__))
    if value != value:
        raise ConfigError("%s: expected seconds, got NaN" % name, name, "")
    return float(value)


def _timeout(timeout):
    """``timeout=`` as the duration text the library reads: None (no limit), seconds, or a
    duration such as "30s"."""
    if timeout is None:
        return ""
    if isinstance(timeout, str):
        return timeout
    return "%rs" % _seconds(timeout, "timeout")


def _paths(value, what):
    if value is None:
        return []
    if isinstance(value, (str, _os.PathLike)):
        return [_os.fspath(value)]
    return [_os.fspath(v) for v in value]


def predict(system, workload, plan=None, overrides=None, iterations=3, config_dir=None, all_micro_batches=False,
            timeout=None):
    """``perfcast predict --json -``: the predicted iteration (``iteration_time_s``, ...).
    ``all_micro_batches``: ``--all-micro-batches`` (simulate every micro-batch of a Transformer)."""
    s, st = _document(system, "system", config_dir)
    w, wt = _document(workload, "workload", config_dir)
    p, pt = _document(plan, "plan", config_dir) if plan is not None else (None, None)
    return _json.loads(_perfcast.predict(s, st, w, wt, p, pt, _override_texts(overrides), _integer(iterations, "iterations"),
                                  bool(all_micro_batches), False, _timeout(timeout)))


def predict_text(system, workload, plan=None, overrides=None, iterations=3, config_dir=None, all_micro_batches=False,
                 timeout=None):
    """The text report ``perfcast predict`` prints."""
    s, st = _document(system, "system", config_dir)
    w, wt = _document(workload, "workload", config_dir)
    p, pt = _document(plan, "plan", config_dir) if plan is not None else (None, None)
    return _perfcast.predict(s, st, w, wt, p, pt, _override_texts(overrides), _integer(iterations, "iterations"),
                           bool(all_micro_batches), True, _timeout(timeout))


def comm(system, collective="all_reduce", sizes="8B:16GiB", ranks=0, nodes=0, config_dir=None, timeout=None):
    """``perfcast comm --json -``: a collective's time and bandwidth per message size.
    ``sizes`` is "FROM:TO" (doubling) or a comma list, or a list of sizes."""
    s, st = _document(system, "system", config_dir)
    if not isinstance(sizes, str):
        sizes = ",".join(v if isinstance(v, str) else "%dB" % _integer(v, "sizes") for v in _list(sizes, "sizes"))
    if isinstance(nodes, (list, tuple)):
        nodes = ",".join(str(n) for n in _integers(nodes, "nodes"))
    else:
        nodes = str(_integer(nodes, "nodes")) if _integer(nodes, "nodes") != 0 else ""
    return _json.loads(_perfcast.comm(s, st, collective, sizes, _integer(ranks, "ranks"), nodes, False, _timeout(timeout)))


def shard(system, workload, overrides=None, budget="10s", evaluations=0, seed=1, plan_format="perfcast", config_dir=None,
          memory_tiers="auto", dense_layout="workload", timeout=None, module_path="sparse_arch.embedding_bag_collection"):
    """``perfcast shard --json -``: the best plan found (``best.plan``, in ``plan_format``
    "perfcast" or "torchrec"), the baselines and the search statistics. ``budget`` is a
    time ("10s", "500ms") or seconds; ``evaluations`` > 0 stops after that many plans
    instead (deterministic for a seed). ``memory_tiers`` "auto", "on" or "off": tables in
    host memory (fused_uvm, fused_uvm_caching) in the search (auto: when nothing fits in HBM).
    ``dense_layout`` "workload", "data_parallel", "hybrid" or "search" (both, the faster wins).
    ``module_path``: where a "torchrec" plan puts the tables (TorchRec matches it exactly)."""
    s, st = _document(system, "system", config_dir)
    w, wt = _document(workload, "workload", config_dir)
    if not isinstance(budget, str):
        budget = "%rs" % _seconds(budget, "budget")
    result, _text = _perfcast.shard(s, st, w, wt, _override_texts(overrides), budget, _integer(evaluations, "evaluations"),
                                    _integer(seed, "seed"), plan_format,
                                    memory_tiers, dense_layout, module_path, _timeout(timeout))
    return _json.loads(result)


def convert_plan(system, workload, plan, plan_format=None, module_path=None, overrides=None, config_dir=None):
    """``perfcast convert-plan --out -``: ``plan`` (a path or a dict: perfcast's format, or
    TorchRec's as ``dataclasses.asdict`` or ``ShardingPlan._serialize()`` gives it) checked
    against the workload and system and returned as a dict in ``plan_format``: "perfcast",
    "torchrec" (asdict's shape), "torchrec_serialized", or None for the shape it came in (a
    TorchRec plan then comes back equal to what was given). ``module_path``: every table under
    this module (None: each table's module as given)."""
    s, st = _document(system, "system", config_dir)
    w, wt = _document(workload, "workload", config_dir)
    p, pt = _document(plan, "plan", config_dir)
    for value, kind in ((plan_format, "plan_format"), (module_path, "module_path")):
        if value is not None and not isinstance(value, str):
            raise TypeError("%s: expected a string or None, got %s" % (kind, type(value).__name__))
    return _json.loads(_perfcast.convert_plan(s, st, w, wt, p, pt, _override_texts(overrides), plan_format or "",
                                              module_path or ""))


def plan(system, workload, overrides=None, gpus=0, micro_batches=None, cp=None, vp=None, ep=None, max_tp=0,
         overlaps="search", budget=0, threads=0, timeout=None):
    """``perfcast plan --json -``: every predicted Transformer parallelism, fastest first
    (``plans``), those screened out and why (``rejected``), and where the workload's own
    stands (``asked``). ``system`` and ``workload`` are file paths (the search re-reads them
    per candidate). ``micro_batches``, ``cp``, ``vp``, ``ep``: lists of sizes to try (None:
    1,2,4,8 micro-batches and the workload's own cp / vp / ep); ``max_tp`` 0: one node;
    ``overlaps`` "search" or "off"; ``budget`` seconds (0: none); ``threads`` 0: all cores."""
    for value, kind in ((system, "system"), (workload, "workload")):
        if not isinstance(value, (str, _os.PathLike)):
            raise TypeError("%s: plan takes a file path, got %s" % (kind, type(value).__name__))
    result, _text = _perfcast.plan(_os.fspath(system), _os.fspath(workload), _override_texts(overrides),
                                   _integer(gpus, "gpus"), _integers(micro_batches, "micro_batches"), _integers(cp, "cp"),
                                   _integers(vp, "vp"), _integers(ep, "ep"), _integer(max_tp, "max_tp"), overlaps,
                                   _seconds(budget, "budget"), _integer(threads, "threads"), _timeout(timeout))
    return _json.loads(result)


def report(results, title="perfcast report"):
    """``perfcast report --out -``: the self-contained HTML page (a str) of result files
    (paths: predict, predict grids, plan, comm, shard, replay --json; validation .jsonl)."""
    if not isinstance(title, str):
        raise TypeError("title: expected a string, got %s" % type(title).__name__)
    return _perfcast.report(_paths(results, "results"), title)


def trace_stats(files, top=10, timeout=None):
    """``perfcast trace-stats --json -``: per-iteration times, GPU busy, communication and the
    ``top`` kernels of Kineto traces (a path or a list of paths: .json, .json.gz, .tar.gz)."""
    return _json.loads(_perfcast.trace_stats(_paths(files, "files"), _integer(top, "top"), _timeout(timeout)))


def index_stats(indices=None, offsets=None, lengths=None, locality=None, stats=None, tables=0, batch=0, rows=None,
                dtype="int64", dim=0, weight_dtype="fp32", system=None, as_distribution=False, histogram=False, timeout=None):
    """``perfcast index-stats --json -``: embedding index statistics from raw arrays
    (``indices`` with ``offsets`` or ``lengths``, ``tables``, ``batch``), Meta's ``locality``
    stats or a ``stats`` file of ours; ``as_distribution`` gives the per-table "distribution"
    objects a workload table accepts."""
    def path(value, name):
        if value is None:
            return ""
        if not isinstance(value, (str, _os.PathLike)):
            raise TypeError("%s: expected a file path, got %s" % (name, type(value).__name__))
        return _os.fspath(value)
    return _json.loads(_perfcast.index_stats(path(indices, "indices"), path(offsets, "offsets"), path(lengths, "lengths"),
                                             path(locality, "locality"), path(stats, "stats"), _integer(tables, "tables"),
                                             _integer(batch, "batch"), _integers(rows, "rows"), dtype, _integer(dim, "dim"),
                                             weight_dtype, path(system, "system"), bool(as_distribution), bool(histogram),
                                             _timeout(timeout)))


def kernels(system, gemm=None, attention=None, memory_bound=None, embedding=None, measurements=None, calibration=None,
            spec_derived=False, leave_one_source_out=False, timeout=None):
    """``perfcast kernels --json -``: single kernels on a system (``gemm``, ``attention``,
    ``memory_bound``, ``embedding``: a spec string such as "m=1,n=8192,k=8192,dtype=bf16" or a
    list of them), or every row of ``measurements`` files with its prediction and error.
    ``system``: a system file or a list (measured rows use the one of their GPU). Fitting
    (``perfcast kernels --fit``) writes files and stays on the command line."""
    def specs(value, name):
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        return [str(v) for v in _list(value, name)]
    return _json.loads(_perfcast.kernels(_paths(system, "system"), specs(gemm, "gemm"), specs(attention, "attention"),
                                         specs(memory_bound, "memory_bound"), specs(embedding, "embedding"),
                                         _paths(measurements, "measurements"),
                                         _os.fspath(calibration) if calibration is not None else "", bool(spec_derived),
                                         bool(leave_one_source_out), _timeout(timeout)))


def import_trace(kineto, et=None, name="", batch=0, timeout=None):
    """``perfcast import``: the workload dict (model "trace") the command writes to --out,
    from Kineto traces (one per rank) and optionally execution traces."""
    workload, _text = _perfcast.import_trace(_paths(kineto, "kineto"), _paths(et, "et"), name, _integer(batch, "batch"),
                                              _timeout(timeout))
    return _json.loads(workload)


def replay(kineto, et=None, host="measured", kernels="measured", infer_waits=False, system=None, calibration=None,
           ranks="", steps="", timeout=None):
    """``perfcast replay --json -``: traced iterations simulated with their measured (or
    predicted, with ``system``) kernel durations against the measured step times."""
    return _json.loads(_perfcast.replay(_paths(kineto, "kineto"), _paths(et, "et"), host, kernels, bool(infer_waits),
                                        _os.fspath(system) if system is not None else "",
                                        _os.fspath(calibration) if calibration is not None else "", ranks, steps,
                                        _timeout(timeout))[0])
