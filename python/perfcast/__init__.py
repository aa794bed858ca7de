"""perfcast from Python: the command line's predictions as dicts.

Each function runs the same C++ code as the ``perfcast`` command and returns the dict
that the command writes with ``--json`` (the same ``context`` block first). Configurations
are file paths or dicts shaped like the files; what-if overrides are a dict mapping the
command line's ``--set`` paths (``"workload.batch_size"``, ``"system.nodes"``,
``"workload.embedding.tables[0].rows"``) to values. Bad input raises
:class:`ConfigError`, which carries the file and the JSON path. The GIL is released while
the C++ code runs (simulation, sharding search, trace reading), so threads may run
predictions in parallel.

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

__all__ = ["ConfigError", "SimulationError", "predict", "predict_text", "comm", "shard", "plan", "import_trace", "replay"]


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
        out.append("%s=%s" % (path, value if isinstance(value, str) else _json.dumps(value, allow_nan=False)))
    return out


def _paths(value, what):
    if value is None:
        return []
    if isinstance(value, (str, _os.PathLike)):
        return [_os.fspath(value)]
    return [_os.fspath(v) for v in value]


def predict(system, workload, plan=None, overrides=None, iterations=3, config_dir=None, all_micro_batches=False):
    """``perfcast predict --json -``: the predicted iteration (``iteration_time_s``, ...).
    ``all_micro_batches``: ``--all-micro-batches`` (simulate every micro-batch of a Transformer)."""
    s, st = _document(system, "system", config_dir)
    w, wt = _document(workload, "workload", config_dir)
    p, pt = _document(plan, "plan", config_dir) if plan is not None else (None, None)
    return _json.loads(_perfcast.predict(s, st, w, wt, p, pt, _override_texts(overrides), int(iterations),
                                  bool(all_micro_batches), False))


def predict_text(system, workload, plan=None, overrides=None, iterations=3, config_dir=None, all_micro_batches=False):
    """The text report ``perfcast predict`` prints."""
    s, st = _document(system, "system", config_dir)
    w, wt = _document(workload, "workload", config_dir)
    p, pt = _document(plan, "plan", config_dir) if plan is not None else (None, None)
    return _perfcast.predict(s, st, w, wt, p, pt, _override_texts(overrides), int(iterations),
                           bool(all_micro_batches), True)


def comm(system, collective="all_reduce", sizes="8B:16GiB", ranks=0, nodes=0, config_dir=None):
    """``perfcast comm --json -``: a collective's time and bandwidth per message size.
    ``sizes`` is "FROM:TO" (doubling) or a comma list, or a list of sizes."""
    s, st = _document(system, "system", config_dir)
    if not isinstance(sizes, str):
        sizes = ",".join(str(v) if isinstance(v, str) else "%dB" % int(v) for v in sizes)
    if isinstance(nodes, (list, tuple)):
        nodes = ",".join(str(int(n)) for n in nodes)
    else:
        nodes = str(int(nodes)) if int(nodes) != 0 else ""
    return _json.loads(_perfcast.comm(s, st, collective, sizes, int(ranks), nodes, False))


def shard(system, workload, overrides=None, budget="10s", evaluations=0, seed=1, plan_format="perfcast", config_dir=None,
          memory_tiers="auto", dense_layout="workload"):
    """``perfcast shard --json -``: the best plan found (``best.plan``, in ``plan_format``
    "perfcast" or "torchrec"), the baselines and the search statistics. ``budget`` is a
    time ("10s", "500ms") or seconds; ``evaluations`` > 0 stops after that many plans
    instead (deterministic for a seed). ``memory_tiers`` "auto", "on" or "off": tables in
    host memory (fused_uvm, fused_uvm_caching) in the search (auto: when nothing fits in HBM).
    ``dense_layout`` "workload", "data_parallel", "hybrid" or "search" (both, the faster wins)."""
    s, st = _document(system, "system", config_dir)
    w, wt = _document(workload, "workload", config_dir)
    if not isinstance(budget, str):
        budget = "%rs" % float(budget)
    result, _text = _perfcast.shard(s, st, w, wt, _override_texts(overrides), budget, int(evaluations), int(seed), plan_format,
                                    memory_tiers, dense_layout)
    return _json.loads(result)


def plan(system, workload, overrides=None, gpus=0, micro_batches=None, cp=None, vp=None, ep=None, max_tp=0,
         overlaps="search", budget=0, threads=0):
    """``perfcast plan --json -``: every predicted Transformer parallelism, fastest first
    (``plans``), those screened out and why (``rejected``), and where the workload's own
    stands (``asked``). ``system`` and ``workload`` are file paths (the search re-reads them
    per candidate). ``micro_batches``, ``cp``, ``vp``, ``ep``: lists of sizes to try (None:
    1,2,4,8 micro-batches and the workload's own cp / vp / ep); ``max_tp`` 0: one node;
    ``overlaps`` "search" or "off"; ``budget`` seconds (0: none); ``threads`` 0: all cores."""
    for value, kind in ((system, "system"), (workload, "workload")):
        if not isinstance(value, (str, _os.PathLike)):
            raise TypeError("%s: plan takes a file path, got %s" % (kind, type(value).__name__))
    result, _text = _perfcast.plan(_os.fspath(system), _os.fspath(workload), _override_texts(overrides), int(gpus),
                                   [int(v) for v in (micro_batches or [])], [int(v) for v in (cp or [])],
                                   [int(v) for v in (vp or [])], [int(v) for v in (ep or [])], int(max_tp), overlaps,
                                   float(budget), int(threads))
    return _json.loads(result)


def import_trace(kineto, et=None, name="", batch=0):
    """``perfcast import``: the workload dict (model "trace") the command writes to --out,
    from Kineto traces (one per rank) and optionally execution traces."""
    workload, _text = _perfcast.import_trace(_paths(kineto, "kineto"), _paths(et, "et"), name, int(batch))
    return _json.loads(workload)


def replay(kineto, et=None, host="measured", kernels="measured", infer_waits=False, system=None, calibration=None,
           ranks="", steps=""):
    """``perfcast replay --json -``: traced iterations simulated with their measured (or
    predicted, with ``system``) kernel durations against the measured step times."""
    return _json.loads(_perfcast.replay(_paths(kineto, "kineto"), _paths(et, "et"), host, kernels, bool(infer_waits),
                                        _os.fspath(system) if system is not None else "",
                                        _os.fspath(calibration) if calibration is not None else "", ranks, steps)[0])
