"""The Python argument layer: time limits (``timeout=``) and a property test that calls every
function with arguments drawn at random (a fixed seed, so that a failure repeats) and accepts
only the documented exceptions: ConfigError (bad input), TypeError (a value of the wrong
Python type), TimeoutError (``timeout=`` passed), SimulationError (a simulation that cannot
go on). Anything else (RuntimeError, KeyError, a crash of the interpreter) is a failure."""
import math
import random

import pytest

import perfcast

GPT3_RECIPE = {"system.nodes": 16, "workload.parallelism.tp": 4, "workload.parallelism.pp": 8,
               "workload.parallelism.vp": 12, "workload.global_batch": 256, "workload.micro_batch": 1}


def test_predict_timeout_raises_timeout_error(src):
    # The recipe takes 0.7-2 s to predict on the machines measured (docs/benchmarks.md): 0.1 s is
    # short enough on a much faster one.
    with pytest.raises(TimeoutError, match="stopped by timeout=0.1s"):
        perfcast.predict(src / "configs/systems/dgx_h100.json", src / "configs/workloads/gpt3_175b.json",
                         overrides=GPT3_RECIPE, timeout=0.1)


def test_searches_return_what_they_found_in_time(src):
    # GPT-3 175B on 1,024 GPUs: 1,656 choices, 5-14 s of search on one core (docs/benchmarks.md).
    result = perfcast.plan(str(src / "configs/systems/dgx_h100.json"), str(src / "configs/workloads/gpt3_175b.json"),
                           gpus=1024, overrides={"workload.global_batch": 1536}, threads=1, timeout="1s")
    assert result["not_run"], "a 1 s limit leaves candidates not run"
    shard = perfcast.shard(src / "configs/systems/dgx_h100.json", src / "configs/workloads/dlrm_default.json",
                           budget="60s", timeout=1)
    assert shard["search"]["timed_out"]


def test_timeout_values_are_checked(src):
    args = (src / "configs/systems/dgx_h100.json", src / "configs/workloads/dlrm_default.json")
    with pytest.raises(TypeError):
        perfcast.predict(*args, timeout=True)
    with pytest.raises(TypeError):
        perfcast.predict(*args, timeout=[1])
    for bad in (0, -1, "0s", "soon", math.inf):
        with pytest.raises(perfcast.ConfigError):
            perfcast.predict(*args, timeout=bad)
    assert perfcast.predict(*args, timeout=60)["iteration_time_s"] > 0


ACCEPTED = (perfcast.ConfigError, TypeError, TimeoutError, perfcast.SimulationError)


def draw(rng, src):
    """A value of any kind an argument may be given by mistake."""
    choices = [
        lambda: None, lambda: True, lambda: rng.randint(-3, 3), lambda: rng.choice([0, 2**31, 2**63, -2**63]),
        lambda: rng.choice([0.0, -0.5, 1e-300, 1e300, math.nan, math.inf]), lambda: "",
        lambda: rng.choice(["10s", "0s", "-1s", "1e400s", "x", "8B:1GiB", "search", "off", "torchrec", "\xfe\x00"]),
        lambda: [rng.randint(-2, 8) for _ in range(rng.randint(0, 3))], lambda: {"workload.batch_size": rng.randint(-1, 5)},
        lambda: str(src / "configs/systems/dgx_h100.json"), lambda: str(src / "configs/workloads/gpt2.json"),
        lambda: {"name": "not a system"}, lambda: object(),
    ]
    return rng.choice(choices)()


def test_every_function_raises_only_documented_exceptions(src):
    rng = random.Random(20261127)
    sys_file, dlrm, gpt2 = (str(src / p) for p in ("configs/systems/dgx_h100.json", "configs/workloads/dlrm_default.json",
                                                  "configs/workloads/gpt2.json"))
    calls = [
        (perfcast.predict, (sys_file, dlrm), ["plan", "overrides", "iterations", "all_micro_batches"]),
        (perfcast.predict_text, (sys_file, gpt2), ["overrides", "iterations", "all_micro_batches"]),
        (perfcast.comm, (sys_file,), ["collective", "sizes", "ranks", "nodes"]),
        (perfcast.shard, (sys_file, dlrm), ["overrides", "budget", "evaluations", "seed", "plan_format", "memory_tiers",
                                            "dense_layout"]),
        (perfcast.plan, (sys_file, gpt2), ["overrides", "gpus", "micro_batches", "cp", "vp", "ep", "expert_tp", "max_tp",
                                           "overlaps", "budget", "threads"]),
    ]
    ran = 0
    for _ in range(150):
        fn, base, names = rng.choice(calls)
        kwargs = {name: draw(rng, src) for name in rng.sample(names, rng.randint(1, min(3, len(names))))}
        if fn is perfcast.shard:
            kwargs.setdefault("evaluations", 2)
        kwargs["timeout"] = 5
        try:
            fn(*base, **kwargs)
        except ACCEPTED:
            pass
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail("%s(%r) raised %s: %s" % (fn.__name__, kwargs, type(e).__name__, e))
        ran += 1
    assert ran == 150
