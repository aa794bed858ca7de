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

import builtins as _builtins
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

__all__ = ["ConfigError", "SimulationError", "FitRefused", "predict", "predict_text", "comm", "shard", "convert_plan", "plan",
           "import_trace", "replay", "trace_stats", "index_stats", "kernels", "report", "list", "calibrate_comms",
           "calibrate_kernels", "calibrate_runtime", "profile", "run", "validate"]


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
    return _builtins.list(values)


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
    if isinstance(nodes, (_builtins.list, tuple)):
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
         overlaps="search", budget=0, threads=0, timeout=None, expert_tp=None, exhaustive=False):
    """``perfcast plan --json -``: every predicted Transformer parallelism, fastest first
    (``plans``), those screened out and why (``rejected``), and where the workload's own
    stands (``asked``). ``system`` and ``workload`` are file paths (the search re-reads them
    per candidate). ``micro_batches``, ``cp``, ``vp``, ``ep``, ``expert_tp``: lists of sizes to
    try (None: 1,2,4,8 micro-batches and the workload's own cp / vp / ep / moe.expert_tp); ``max_tp`` 0: one node;
    ``overlaps`` "search" or "off"; ``budget`` seconds (0: none); ``threads`` 0: all cores;
    ``exhaustive``: simulate every candidate in full (default: the ten fastest are simulated in
    full, plans estimated well behind them keep the estimate, ``how`` == "estimated")."""
    for value, kind in ((system, "system"), (workload, "workload")):
        if not isinstance(value, (str, _os.PathLike)):
            raise TypeError("%s: plan takes a file path, got %s" % (kind, type(value).__name__))
    result, _text = _perfcast.plan(_os.fspath(system), _os.fspath(workload), _override_texts(overrides),
                                   _integer(gpus, "gpus"), _integers(micro_batches, "micro_batches"), _integers(cp, "cp"),
                                   _integers(vp, "vp"), _integers(ep, "ep"), _integers(expert_tp, "expert_tp"),
                                   _integer(max_tp, "max_tp"), overlaps,
                                   _seconds(budget, "budget"), _integer(threads, "threads"), bool(exhaustive),
                                   _timeout(timeout))
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
            spec_derived=False, leave_one_source_out=False, fit=None, fit_dir=None, note="", timeout=None):
    """``perfcast kernels --json -``: single kernels on a system (``gemm``, ``attention``,
    ``memory_bound``, ``embedding``: a spec string such as "m=1,n=8192,k=8192,dtype=bf16" or a
    list of them), or every row of ``measurements`` files with its prediction and error.
    ``system``: a system file or a list (measured rows use the one of their GPU). ``fit``: a
    system file or a list (``--fit``): fit those systems' GPUs' kernel-model-2 calibrations
    on the measurements and write them (to ``fit_dir``, default ``../calibration/`` beside
    each system file), all of them or none; ``note`` is recorded in them."""
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
                                         bool(leave_one_source_out), _paths(fit, "fit"),
                                         _os.fspath(fit_dir) if fit_dir is not None else "", str(note), _timeout(timeout)))


def list(systems=None):  # noqa: A001  (the command's name; the built-in list stays reachable as builtins.list)
    """``perfcast list --json -``: the built-in predictors and collective models with the
    sources of their constants, and the system files of the folder ``systems`` (default:
    configs/systems under the current folder, when it exists)."""
    return _json.loads(_perfcast.list(_os.fspath(systems) if systems is not None else ""))


class FitRefused(RuntimeError):
    """A calibration that was refused (the command line's exit 1): a fit worse than the
    model it replaces on held-out data, or measurements that do not constrain it. Nothing
    was written. ``report`` is the fit report dict (``--json``) where one was produced,
    else None."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report


def _calibration(result):
    """The report dict of a calibration; FitRefused when it was refused; its warnings as
    Python warnings."""
    document, errors, warnings_ = result
    if warnings_:
        import warnings as _warnings
        for w in warnings_:
            _warnings.warn(w, stacklevel=3)
    report = _json.loads(document) if document else None
    if errors:
        raise FitRefused("; ".join(errors), report)
    return report


def calibrate_comms(system, nccl_tests, collective=None, ranks=0, out=None, leave_one_out=False, leave_one_source_out=False,
                    only=None, force=False, timeout=None):
    """``perfcast calibrate comms --json -``: fit the collective model to nccl-tests logs or
    measurement-table CSVs (``nccl_tests``: a path or a list) and write the calibration to
    ``out`` (default: ``<system>.comms.json`` beside the system file). Returns the fit
    report; raises :class:`FitRefused` (nothing written) when a fit is worse than the
    spec-derived model on held-out sizes, unless ``force``."""
    return _calibration(_perfcast.calibrate_comms(_os.fspath(system), _paths(nccl_tests, "nccl_tests"), collective or "",
                                                  _integer(ranks, "ranks"), _os.fspath(out) if out is not None else "",
                                                  bool(leave_one_out), bool(leave_one_source_out), bool(force),
                                                  [str(o) for o in _list(only, "only")] if only is not None else [],
                                                  _timeout(timeout)))


def calibrate_kernels(system, measurements, out=None, families=None, note="", timeout=None):
    """``perfcast calibrate kernels --json -``: fit the kernel predictors of ``system``'s
    GPU to measurement JSONL files (``perfcast profile`` output) and write the calibration
    to ``out`` (default: ``configs/calibration/<gpu>.json`` beside the systems folder);
    ``families``: write only those fitted families. Returns the fit report."""
    return _calibration(_perfcast.calibrate_kernels(_os.fspath(system), _paths(measurements, "measurements"),
                                                    _os.fspath(out) if out is not None else "",
                                                    [str(f) for f in _list(families, "families")] if families is not None else [],
                                                    str(note), _timeout(timeout)))


def calibrate_runtime(system, measurements, out, base=None, force=False, timeout=None):
    """``perfcast calibrate runtime --json -``: fit a runtime profile's host cost per op to
    measured iteration times (a CSV ``workload,measured[,set,plan,split]``) and write the
    profile ``out`` (``NAME.json``, NAME its runtime name). Returns the fit report; raises
    :class:`FitRefused` (nothing written) when the fit is worse than the base on held-out
    runs (unless ``force``) or the runs do not constrain it."""
    return _calibration(_perfcast.calibrate_runtime(_os.fspath(system), _os.fspath(measurements), _os.fspath(out),
                                                    _os.fspath(base) if base is not None else "", bool(force),
                                                    _timeout(timeout)))


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


# The commands that measure on a GPU (profile, run, validate) run in the `perfcast`
# executable, which hands them to `perfcast-gpu` beside it, as on the command line: this
# package, like `perfcast` itself, loads no CUDA library, and a measurement never shares
# the calling process's CUDA context (a PyTorch program's, for instance).

def _executable():
    """The `perfcast` executable: $PERFCAST_EXECUTABLE, the one installed with this
    package (perfcast/bin/), the build folder's (build/cli/ beside build/python/), or the
    first on PATH."""
    import shutil
    named = _os.environ.get("PERFCAST_EXECUTABLE")
    if named:
        return named
    here = _os.path.dirname(_os.path.abspath(__file__))
    for candidate in (_os.path.join(here, "bin", "perfcast"), _os.path.join(here, "..", "..", "cli", "perfcast")):
        if _os.path.isfile(candidate) and _os.access(candidate, _os.X_OK):
            return _os.path.normpath(candidate)
    found = shutil.which("perfcast")
    if found:
        return found
    raise RuntimeError("no perfcast executable: install the package with its executables (pip install .), build the "
                       "perfcast target, or set PERFCAST_EXECUTABLE")


def _run_executable(args, timeout):
    """`perfcast ARGS --json -` as a dict. ``timeout`` goes to the command's own --timeout
    (its exit 3 raises TimeoutError); exit 2 (bad input) raises ConfigError, exit 1 (no
    GPU, a failed measurement) RuntimeError, each with the command's message."""
    import subprocess
    command = [_executable()] + [str(a) for a in args] + ["--json", "-"]
    limit = _timeout(timeout)
    if limit:
        command += ["--timeout", limit]
    done = subprocess.run(command, capture_output=True, text=True)
    # The command's log lines, without their level prefix ("error: ").
    message = "\n".join(line[len("error: "):] if line.startswith("error: ") else line
                        for line in done.stderr.strip().splitlines())
    if done.returncode == 2:
        raise ConfigError(message or "bad input (exit 2)", "", "")
    if done.returncode == 3:
        raise TimeoutError(message or "timeout=%s: the command did not finish in time" % limit)
    if done.returncode != 0:
        raise RuntimeError(message or "%s exited with %d" % (" ".join(command[:2]), done.returncode))
    return _json.loads(done.stdout)


def profile(sweep, out=None, device=0, offset=0, limit=0, time_budget=0, append=False, no_cupti=False, dry_run=False,
            timeout=None):
    """``perfcast profile --json -``: run microbenchmark sweeps (``sweep``: a sweep file or a
    list) on a GPU and write their measurements (JSON lines) to ``out``; returns the sweeps'
    case counts and the run's summary (``measured``, ``failed``, ``not_run``, ``timer``).
    ``dry_run``: check the sweeps and count their cases, no GPU needed."""
    args = ["profile", "--no-progress"]
    for s in _paths(sweep, "sweep"):
        args += ["--sweep", s]
    if out is not None:
        args += ["--out", _os.fspath(out)]
    args += ["--device", _integer(device, "device"), "--offset", _integer(offset, "offset"), "--limit", _integer(limit, "limit"),
             "--time-budget", repr(_seconds(time_budget, "time_budget"))]
    args += (["--append"] if append else []) + (["--no-cupti"] if no_cupti else []) + (["--dry-run"] if dry_run else [])
    return _run_executable(args, timeout)


def run(system, workload, plan=None, iterations=20, warmup=5, seed=1, devices=0, measurements=None, trace=None, timeout=None):
    """``perfcast run --json -``: train the workload's DLRM on this machine's GPU(s) with the
    reference executor and return the measured iteration times. ``measurements`` /
    ``trace``: also write the CUPTI kernel trace as measurement JSON lines / a Chrome trace.
    Raises RuntimeError where there is no CUDA GPU (after checking the inputs)."""
    args = ["run", "--system", _os.fspath(system), "--workload", _os.fspath(workload), "--iterations", _integer(iterations, "iterations"),
            "--warmup", _integer(warmup, "warmup"), "--seed", _integer(seed, "seed"), "--devices", _integer(devices, "devices")]
    if plan is not None:
        args += ["--plan", _os.fspath(plan)]
    if measurements is not None:
        args += ["--measurements", _os.fspath(measurements)]
    if trace is not None:
        args += ["--trace", _os.fspath(trace)]
    return _run_executable(args, timeout)


def validate(system=None, configs=10, first=0, seed=1, name=None, out_dir=None, warmup=3, iterations=10, interaction="cat",
             mlp_dtype="fp32", max_rows=None, dry_run=False, summarize=None, compare=None, timeout=None):
    """``perfcast validate --json -``: random DLRM configs predicted on ``system`` and
    measured with the reference executor (result lines appended under ``out_dir``);
    ``dry_run``: generate and predict only (no GPU). ``summarize``: result files to
    re-summarize; ``compare``: PyTorch result files to predict on ``system``."""
    args = ["validate"]
    if system is not None:
        args += ["--system", _os.fspath(system)]
    if summarize is not None:
        args += ["--summarize"] + _paths(summarize, "summarize")
    elif compare is not None:
        args += ["--compare"] + _paths(compare, "compare")
    else:
        args += ["--configs", _integer(configs, "configs"), "--first", _integer(first, "first"), "--seed", _integer(seed, "seed"),
                 "--warmup", _integer(warmup, "warmup"), "--iterations", _integer(iterations, "iterations"),
                 "--interaction", str(interaction), "--mlp-dtype", str(mlp_dtype)]
        if name is not None:
            args += ["--name", str(name)]
        if out_dir is not None:
            args += ["--out-dir", _os.fspath(out_dir)]
        if max_rows is not None:
            args += ["--max-rows", _integer(max_rows, "max_rows")]
        if dry_run:
            args.append("--dry-run")
    return _run_executable(args, timeout)
