"""The perfcast Python package against the command line (same JSON) and hand-worked values."""
import json
import struct
import subprocess
import threading
import time

import pytest

import perfcast
import perfcast.torchrec


def run_cli(cli, *args):
    out = subprocess.run([cli, *map(str, args)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def without_date(result):
    result = json.loads(json.dumps(result))
    result["context"].pop("date", None)
    return result


def test_predict_equals_cli_json(src, cli):
    sys_file = src / "configs/systems/dgx_h100.json"
    wl_file = src / "configs/workloads/dlrm_default.json"
    expected = run_cli(cli, "predict", "--system", sys_file, "--workload", wl_file, "--json", "-")
    got = perfcast.predict(str(sys_file), str(wl_file))
    assert without_date(got) == without_date(expected)
    assert got["iteration_time_s"] > 0


def test_steady_state_and_all_micro_batches_equal_cli(src, cli):
    sys_file = src / "configs/systems/dgx_h100.json"
    wl_file = src / "configs/workloads/gpt3_1.3b.json"
    for flags, kwargs in (([], {}), (["--all-micro-batches"], {"all_micro_batches": True})):
        expected = run_cli(cli, "predict", "--system", sys_file, "--workload", wl_file, "--set", "workload.global_batch=2048",
                           *flags, "--json", "-")
        got = perfcast.predict(sys_file, wl_file, overrides={"workload.global_batch": 2048}, **kwargs)
        assert without_date(got) == without_date(expected)
        assert ("steady_state" in got["context"]) == (not flags)  # 64 micro-batches: extrapolated unless asked not to


def test_overrides_dict_equals_cli_set(src, cli):
    sys_file = src / "configs/systems/dgx_h100.json"
    wl_file = src / "configs/workloads/dlrm_default.json"
    expected = run_cli(cli, "predict", "--system", sys_file, "--workload", wl_file, "--set", "workload.batch_size=4096",
                       "--set", "system.gpu=h200.json", "--json", "-")
    got = perfcast.predict(sys_file, wl_file, overrides={"workload.batch_size": 4096, "system.gpu": "h200.json"})
    assert without_date(got) == without_date(expected)
    assert got["context"]["overrides"] == ["workload.batch_size=4096", "system.gpu=h200.json"]


def test_configs_as_dicts_equal_files(src):
    sys_file = src / "configs/systems/dgx_h100.json"
    wl_file = src / "configs/workloads/dlrm_default.json"
    system = json.loads(sys_file.read_text())
    workload = json.loads(wl_file.read_text())
    from_files = perfcast.predict(sys_file, wl_file)
    from_dicts = perfcast.predict(system, workload, config_dir=src / "configs/systems")
    assert from_dicts["iteration_time_s"] == from_files["iteration_time_s"]
    # Doubling every table's rows and the batch is a different workload: the time changes.
    workload["batch_size"] *= 2
    assert perfcast.predict(system, workload, config_dir=src / "configs/systems")["iteration_time_s"] > from_files["iteration_time_s"]


def test_config_error_names_file_and_json_path(src):
    workload = json.loads((src / "configs/workloads/dlrm_default.json").read_text())
    workload["batch_size"] = "many"
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.predict(src / "configs/systems/dgx_h100.json", workload)
    assert e.value.file.endswith("<workload dict>")
    assert e.value.path == "/batch_size"
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.predict(src / "configs/systems/dgx_h100.json", src / "configs/workloads/dlrm_default.json",
                         overrides={"workload.batch_sise": 1})
    assert "batch_size" in str(e.value)  # "did you mean"
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.predict(src / "configs/systems/nope.json", src / "configs/workloads/dlrm_default.json")
    assert e.value.file.endswith("nope.json")
    assert isinstance(e.value, ValueError)


def test_comm_equals_cli_and_bus_bandwidth_by_hand(src, cli):
    sys_file = src / "configs/systems/dgx_h100.json"
    expected = run_cli(cli, "comm", "--system", sys_file, "--collective", "all_reduce", "--sizes", "1MiB,1GiB", "--json", "-")
    got = perfcast.comm(sys_file, "all_reduce", sizes=["1MiB", "1GiB"])
    assert without_date(got) == without_date(expected)  # the two runs may fall in different seconds
    assert got["context"]["ranks"] == 8
    for row in got["results"]:
        # nccl-tests: algbw = bytes / time; all_reduce busbw = algbw x 2 (n - 1) / n = 1.75 algbw on 8 ranks.
        assert row["algbw_GBps"] == pytest.approx(row["bytes"] / row["time_s"] / 1e9, rel=1e-12)
        assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] * 1.75, rel=1e-12)
    assert got["results"][0]["bytes"] == 1048576


def test_plan_equals_cli(src, cli):
    sys_file = src / "configs/systems/dgx_h100.json"
    wl_file = src / "configs/workloads/gpt2.json"
    args = ["plan", "--system", sys_file, "--workload", wl_file, "--gpus", 4, "--set", "workload.global_batch=16",
            "--micro-batches", "1,2", "--threads", 1, "--json", "-"]
    expected = run_cli(cli, *args)
    got = perfcast.plan(sys_file, wl_file, overrides={"workload.global_batch": 16}, gpus=4, micro_batches=[1, 2], threads=1)
    for r in (got, expected):
        r["search"].pop("seconds")
        r["search"].pop("screen_seconds")
    assert without_date(got) == without_date(expected)
    assert len(got["plans"]) == 42  # tests/model/plan_search_test.cpp counts them by hand
    every = perfcast.plan(sys_file, wl_file, overrides={"workload.global_batch": 16}, gpus=4, micro_batches=[1, 2], threads=1,
                          exhaustive=True)
    assert every["search"]["exhaustive"] and all(p["how"] == "simulated" for p in every["plans"])
    assert [p["iteration_time_s"] for p in every["plans"][:10]] == [p["iteration_time_s"] for p in got["plans"][:10]]
    assert all(p["ep"] == 1 for p in got["plans"])
    with pytest.raises(TypeError):
        perfcast.plan({"schema": "perfcast.system"}, wl_file)
    with pytest.raises(perfcast.ConfigError):
        perfcast.plan(sys_file, wl_file, overlaps="maybe")
    # Sizes that used to divide by zero (SIGFPE killed the interpreter) are refused first.
    for bad in ({"cp": [0]}, {"vp": [0]}, {"micro_batches": [0]}, {"ep": [-1]}, {"max_tp": -2}, {"gpus": -4},
                {"budget": float("nan")}, {"cp": [1] * 65}):
        with pytest.raises(perfcast.ConfigError):
            perfcast.plan(sys_file, wl_file, threads=1, **bad)


def test_shard_equals_cli_and_plan_formats(src, cli):
    sys_file = src / "configs/systems/dgx_h100.json"
    wl_file = src / "configs/workloads/dlrm_default.json"
    args = ["shard", "--system", sys_file, "--workload", wl_file, "--evaluations", 40, "--seed", 3, "--json", "-"]
    expected = run_cli(cli, *args)
    got = perfcast.shard(sys_file, wl_file, evaluations=40, seed=3)
    for r in (got, expected):
        r["search"].pop("wall_s")
    assert without_date(got) == without_date(expected)
    torchrec_shape = perfcast.shard(sys_file, wl_file, evaluations=40, seed=3, plan_format="torchrec")
    plan = torchrec_shape["best"]["plan"]
    assert list(plan) == ["sparse_arch.embedding_bag_collection"]
    # The same plan either way, and predict reads both to the search's time.
    assert perfcast.torchrec.plan_entries(got) == perfcast.torchrec.plan_entries(torchrec_shape)
    for p in (got["best"]["plan"], plan):
        assert perfcast.predict(sys_file, wl_file, plan=p)["iteration_time_s"] == pytest.approx(got["best"]["iteration_time_s"],
                                                                                                  rel=1e-9)


def test_host_memory_kernels_change_the_prediction_and_unmodelled_ones_are_refused(src):
    sys_file = src / "configs/systems/dgx_h100.json"
    wl_file = src / "configs/workloads/dlrm_default.json"
    plan = perfcast.shard(sys_file, wl_file, evaluations=10, plan_format="torchrec")["best"]["plan"]
    hbm = perfcast.predict(sys_file, wl_file, plan=plan)["iteration_time_s"]
    tables = plan["sparse_arch.embedding_bag_collection"]
    name = next(n for n, t in tables.items() if t["compute_kernel"] == "fused")
    tables[name]["compute_kernel"] = "fused_uvm_caching"
    tables[name]["cache_params"] = {"load_factor": 0.05}
    assert perfcast.predict(sys_file, wl_file, plan=plan)["iteration_time_s"] > hbm
    tables[name]["compute_kernel"] = "quant"
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.predict(sys_file, wl_file, plan=plan)
    assert e.value.path == "/sparse_arch.embedding_bag_collection/%s/compute_kernel" % name
    assert "not modelled" in str(e.value)


def test_import_and_replay_equal_cli(src, cli, tmp_path):
    ks = src / "tests/data/kineto_shapes.json"
    subprocess.run([cli, "import", "--kineto", ks, "--out", tmp_path / "w.json"], check=True, capture_output=True)
    assert perfcast.import_trace(str(ks)) == json.loads((tmp_path / "w.json").read_text())
    k0, k1 = src / "tests/data/kineto_rank0.json", src / "tests/data/kineto_rank1.json"
    expected = run_cli(cli, "replay", "--kineto", k0, k1, "--json", "-")
    got = perfcast.replay([k0, k1])
    assert without_date(got) == without_date(expected)


def test_replay_hand_written_trace_value(src):
    # The CLI test's hand-written two-rank fixture replays to 179 us (tests/cli/cli_test.sh).
    got = perfcast.replay([src / "tests/data/kineto_rank0.json", src / "tests/data/kineto_rank1.json"])
    assert '"simulated_s": 0.000179' in json.dumps(got, indent=2)


def test_gil_released_during_search(src):
    """A two-second search in a thread must let this thread run meanwhile."""
    sys_file = src / "configs/systems/dgx_h100.json"
    wl_file = src / "configs/workloads/dlrm_default.json"
    done = []
    worker = threading.Thread(target=lambda: done.append(perfcast.shard(sys_file, wl_file, budget="2s")))
    worker.start()
    last = time.monotonic()
    longest_stall = 0.0
    while worker.is_alive():
        now = time.monotonic()
        longest_stall = max(longest_stall, now - last)
        last = now
    worker.join()
    assert done and done[0]["search"]["wall_s"] >= 1.9
    # With the GIL held, this loop would stall for the whole two seconds of the search;
    # released, it stalls at most for Python's thread switch interval (5 ms by default).
    assert longest_stall < 1.0


def test_torchrec_objects_or_clear_skip(src):
    sys_file = src / "configs/systems/dgx_h100.json"
    wl_file = src / "configs/workloads/dlrm_default.json"
    result = perfcast.shard(sys_file, wl_file, evaluations=10)
    try:
        import torchrec  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs torch and torchrec"):
            perfcast.torchrec.to_sharding_plan(result)
        pytest.skip("torchrec is not installed: to_sharding_plan raises ImportError saying so (checked)")
    plan = perfcast.torchrec.to_sharding_plan(result)
    module = plan.plan[perfcast.torchrec.DLRM_MODULE]
    entries = perfcast.torchrec.plan_entries(result)[perfcast.torchrec.DLRM_MODULE]
    assert set(module) == set(entries)
    for name, ps in module.items():
        assert ps.sharding_type == entries[name]["sharding_type"]


def test_torchrec_serialized_plan_and_errors_naming_the_path():
    # As TorchRec's ShardingPlan._serialize() writes it (torchrec/distributed/types.py): a
    # "plan" key, the shards beside the other fields, no spec for data_parallel.
    serialized = {"plan": {"sparse_arch.embedding_bag_collection": {
        "t_rw": {"sharding_type": "row_wise", "compute_kernel": "fused", "ranks": [0, 1],
                 "shards": [{"shard_offsets": [0, 0], "shard_sizes": [50, 64], "placement": "rank:0/cuda:0"},
                            {"shard_offsets": [50, 0], "shard_sizes": [50, 64], "placement": "rank:1/cuda:1"}]},
        "t_dp": {"sharding_type": "data_parallel", "compute_kernel": "dense", "ranks": [0, 1],
                 "enforce_hbm": True, "output_dtype": "FP16"}}}}
    entries = perfcast.torchrec.plan_entries(serialized)["sparse_arch.embedding_bag_collection"]
    assert entries["t_rw"]["sharding_spec"]["shards"][1]["placement"] == "rank:1/cuda:1"
    assert "shards" not in entries["t_rw"]
    assert entries["t_dp"]["sharding_spec"] is None
    assert entries["t_dp"]["enforce_hbm"] is True and entries["t_dp"]["output_dtype"] == "FP16"  # kept unchanged
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.torchrec.plan_entries({"plan": {"m.ebc": {"t0": {"ranks": [0]}}}})
    assert e.value.path == "/plan/m.ebc/t0"
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.torchrec.plan_entries({"schema": "perfcast.plan", "tables": {"t0": {"ranks": [0]}}})
    assert e.value.path == "/tables/t0"


def test_shard_module_path(src):
    plan = perfcast.shard(src / "configs/systems/dgx_h100.json", src / "configs/workloads/dlrm_default.json",
                          evaluations=3, plan_format="torchrec", module_path="model.sparse.ebc")["best"]["plan"]
    assert list(plan) == ["model.sparse.ebc"]
    with pytest.raises(perfcast.ConfigError):
        perfcast.shard(src / "configs/systems/dgx_h100.json", src / "configs/workloads/dlrm_default.json",
                       evaluations=3, plan_format="torchrec", module_path="a/b")


def test_convert_plan_round_trips_torchrec_plans_and_equals_the_cli(src, cli, tmp_path):
    sys_file = src / "configs/systems/dgx_h100.json"
    wl_file = src / "configs/workloads/dlrm_default.json"
    plan = perfcast.shard(sys_file, wl_file, evaluations=5, plan_format="torchrec")["best"]["plan"]
    # As dataclasses.asdict(ParameterSharding) gives it: every field, None as null.
    for tables in plan.values():
        for t in tables.values():
            for key in ("cache_params", "enforce_hbm", "stochastic_rounding", "bounds_check_mode", "output_dtype",
                        "key_value_params"):
                t.setdefault(key, None)
            t["bounds_check_mode"] = 1
    assert perfcast.convert_plan(sys_file, wl_file, plan) == plan
    # _serialize()'s shape, and a module path of the user's choice.
    serialized = perfcast.convert_plan(sys_file, wl_file, plan, plan_format="torchrec_serialized")
    assert list(serialized) == ["plan"]
    assert perfcast.convert_plan(sys_file, wl_file, serialized) == serialized
    moved = perfcast.convert_plan(sys_file, wl_file, plan, module_path="my_model.ebc")
    assert moved == {"my_model.ebc": plan["sparse_arch.embedding_bag_collection"]}
    # The same JSON as the command line's.
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    expected = run_cli(cli, "convert-plan", "--system", sys_file, "--workload", wl_file, "--plan", path,
                       "--plan-format", "torchrec_serialized", "--out", "-")
    assert serialized == expected
    with pytest.raises(perfcast.ConfigError):
        perfcast.convert_plan(sys_file, wl_file, plan, plan_format="yaml")


def test_trace_stats_index_stats_and_kernels_equal_the_cli(src, cli, tmp_path):
    # trace-stats on the hand-written two-rank fixture.
    k0, k1 = src / "tests/data/kineto_rank0.json", src / "tests/data/kineto_rank1.json"
    expected = run_cli(cli, "trace-stats", k0, k1, "--top", 3, "--json", "-")
    assert perfcast.trace_stats([k0, k1], top=3) == expected
    # index-stats on hand-built int32 arrays: 2 tables x 3 bags, CSR offsets.
    idx, off = tmp_path / "idx.bin", tmp_path / "off.bin"
    idx.write_bytes(struct.pack("<11i", 0, 1, 1, 2, 3, 0, 0, 5, 4, 4, 4))
    off.write_bytes(struct.pack("<7i", 0, 2, 4, 5, 7, 9, 11))
    args = ["index-stats", "--indices", idx, "--offsets", off, "--tables", 2, "--batch", 3, "--dtype", "int32", "--rows", 8]
    expected = run_cli(cli, *args, "--json", "-")
    got = perfcast.index_stats(indices=idx, offsets=off, tables=2, batch=3, dtype="int32", rows=[8])
    assert without_date(got) == without_date(expected)
    assert perfcast.index_stats(indices=idx, offsets=off, tables=2, batch=3, dtype="int32", rows=[8], as_distribution=True) == \
        run_cli(cli, *args, "--as-distribution", "--json", "-")
    with pytest.raises(perfcast.ConfigError):
        perfcast.index_stats(indices=idx, tables=2, batch=3, dtype="int32")  # neither offsets nor lengths
    # kernels: one GEMM and one attention on an H100.
    h100 = src / "configs/systems/h100_sxm.json"
    gemm, attention = "m=1,n=8192,k=8192,dtype=bf16", "batch=1,heads=32,kv_heads=8,seq=4096,head_dim=128,causal=1"
    expected = run_cli(cli, "kernels", "--system", h100, "--gemm", gemm, "--attention", attention, "--json", "-")
    assert without_date(perfcast.kernels(h100, gemm=gemm, attention=attention)) == without_date(expected)
    with pytest.raises(perfcast.ConfigError):
        perfcast.kernels(h100, gemm="m=1,n=8192")


def test_report_equals_the_cli(src, cli, tmp_path):
    k0, k1 = src / "tests/data/kineto_rank0.json", src / "tests/data/kineto_rank1.json"
    replay = tmp_path / "replay.json"
    replay.write_text(json.dumps(perfcast.replay([k0, k1])))
    inputs = [replay, src / "tests/data/validation_results_small.jsonl"]
    out = subprocess.run([cli, "report", *map(str, inputs), "--title", "t", "--out", "-"], check=True, capture_output=True,
                         text=True).stdout
    assert perfcast.report(inputs, title="t") == out
    with pytest.raises(perfcast.ConfigError):
        perfcast.report([src / "configs/systems/dgx_h100.json"])


def test_workload_from_torchrec_model_description(src):
    import types
    base = src / "configs/workloads/dlrm_default.json"
    # As EmbeddingBagConfig objects (attributes) and as dicts, with ParameterConstraints' pooling_factors.
    tables = [types.SimpleNamespace(name="t_user", num_embeddings=1_000_000, embedding_dim=64, feature_names=["user"],
                                    data_type="DataType.FP16"),
              {"name": "t_item", "num_embeddings": 50_000, "embedding_dim": 64, "feature_names": ["item"], "data_type": "FP16"}]
    w = perfcast.torchrec.workload_from_torchrec(tables, base, constraints={"t_user": {"pooling_factors": [20.0]}},
                                                  batch_size=4096)
    assert w["embedding"]["dtype"] == "fp16"
    assert w["batch_size"] == 4096
    assert w["embedding"]["tables"] == [
        {"name": "t_user", "rows": 1_000_000, "dim": 64, "pooling": 20.0, "distribution": {"kind": "uniform"}},
        {"name": "t_item", "rows": 50_000, "dim": 64, "pooling": 1.0, "distribution": {"kind": "uniform"}}]
    # It predicts, and more indices per sample never make the iteration faster.
    sys_file = src / "configs/systems/dgx_h100.json"
    t1 = perfcast.predict(sys_file, w)["iteration_time_s"]
    heavier = perfcast.torchrec.workload_from_torchrec(tables, base, constraints={"t_user": {"pooling_factors": [80.0]}},
                                                       batch_size=4096)
    assert perfcast.predict(sys_file, heavier)["iteration_time_s"] >= t1 > 0
    with pytest.raises(perfcast.ConfigError, match="shared by 2 features"):
        perfcast.torchrec.workload_from_torchrec([dict(tables[1], feature_names=["a", "b"])], base)
    with pytest.raises(perfcast.ConfigError, match="different data types"):
        perfcast.torchrec.workload_from_torchrec([tables[1], dict(tables[1], name="x", data_type="FP32")], base)
    with pytest.raises(perfcast.ConfigError, match="/tables/0/num_embeddings"):
        perfcast.torchrec.workload_from_torchrec([dict(tables[1], num_embeddings=0)], base)


def test_system_from_torchrec_topology(src):
    import types
    GiB = 2 ** 30
    base = src / "configs/systems/dgx_h100.json"
    # As the constructor's keywords: 16 GPUs, 8 per host, 40 GiB of HBM and 128 GiB of DDR per GPU.
    kwargs = {"world_size": 16, "compute_device": "cuda", "hbm_cap": 40 * GiB, "ddr_cap": 128 * GiB, "local_world_size": 8,
              "intra_host_bw": 600e9, "inter_host_bw": 12.5e9}
    s = perfcast.torchrec.system_from_torchrec(kwargs, base)
    assert (s["nodes"], s["gpus_per_node"]) == (2, 8)
    assert s["gpu"]["memory"] == "%dB" % (40 * GiB) and s["host_memory"]["capacity"] == "%dB" % (8 * 128 * GiB)
    assert "intra_host_bw=600000000000.0" in s["sources"]["topology"] and "not used" in s["sources"]["topology"]
    # As a Topology object: capacities from its devices' storage (TorchRec's DeviceHardware).
    devices = [types.SimpleNamespace(rank=r, storage=types.SimpleNamespace(hbm=40 * GiB, ddr=128 * GiB)) for r in range(16)]
    topo = types.SimpleNamespace(world_size=16, local_world_size=8, compute_device="cuda", devices=devices)
    assert perfcast.torchrec.system_from_torchrec(topo, base)["gpu"] == s["gpu"]
    # It predicts 16 GPUs with 40 GiB each (the DGX H100 has 80 GiB).
    r = perfcast.predict(s, src / "configs/workloads/dlrm_default.json", config_dir=src / "configs/systems")
    assert len(r["ranks"]) == 16
    assert {rank["memory"]["capacity_bytes"] for rank in r["ranks"]} == {40 * GiB}
    with pytest.raises(perfcast.ConfigError, match="not a multiple of local_world_size 8"):
        perfcast.torchrec.system_from_torchrec(dict(kwargs, world_size=12), base)
    with pytest.raises(perfcast.ConfigError, match="/compute_device"):
        perfcast.torchrec.system_from_torchrec(dict(kwargs, compute_device="cpu"), base)
    devices[3] = types.SimpleNamespace(rank=3, storage=types.SimpleNamespace(hbm=80 * GiB, ddr=128 * GiB))
    with pytest.raises(perfcast.ConfigError, match="one GPU type"):
        perfcast.torchrec.system_from_torchrec(topo, base)


def test_list_equals_the_cli(src, cli):
    systems = src / "configs/systems"
    got = perfcast.list(systems)
    assert without_date(got) == without_date(run_cli(cli, "list", "--systems", systems, "--json", "-"))
    names = {s["file"].rsplit("/", 1)[-1] for s in got["systems"]}
    assert "dgx_h100.json" in names and "aws_p5.json" in names
    dgx = next(s for s in got["systems"] if s["file"].endswith("/dgx_h100.json"))
    assert (dgx["gpus"], dgx["nodes"], dgx["gpus_per_node"]) == (8, 1, 8)  # one DGX H100: 8 GPUs on one node
    assert all(p["source"] for p in got["predictors"])  # every predictor names the source of its constants
    with pytest.raises(perfcast.ConfigError):
        perfcast.list(src / "no_such_folder")
    assert list((1, 2)) == [1, 2]  # the package's list() does not shadow the built-in outside the package


def test_calibrate_comms_writes_what_the_cli_writes(src, cli, tmp_path):
    system = src / "configs/systems/aws_p5.json"
    table = src / "data/public-measurements/nccl_two_node_p5.csv"
    out = tmp_path / "p5.comms.json"
    expected = run_cli(cli, "calibrate", "comms", "--system", system, "--nccl-tests", table, "--out", out,
                       "--leave-one-source-out", "--json", "-")
    cli_file = json.loads(out.read_text())
    out.unlink()
    got = perfcast.calibrate_comms(system, table, out=out, leave_one_source_out=True)
    assert without_date(got) == without_date(expected)
    assert got["written"] == str(out) and got["refused"] == []
    written = json.loads(out.read_text())
    for cal in (written, cli_file):
        cal.pop("date", None)
    assert written == cli_file
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.calibrate_comms(system, src / "configs/systems/dgx_h100.json", out=tmp_path / "x.json")
    assert "dgx_h100.json" in str(e.value)
    assert not (tmp_path / "x.json").exists()


def test_calibrate_comms_refused_raises_and_writes_nothing(src, tmp_path):
    # An 11-size all-to-all with +-50% alternating jitter on an alpha-beta law (as in
    # tests/cli/calibrate_comms_test.sh): the refit is worse than the prior on held-out sizes.
    log = tmp_path / "alltoall.txt"
    lines = ["# Collective test starting: alltoall_perf"]
    lines += ["#  Rank %d Group  0 Pid 5%d on node01 device %d [0x18] NVIDIA H100 80GB HBM3" % (r, r, r) for r in range(8)]
    lines.append("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong")
    for k in range(11):
        s = 1048576 * 2 ** k
        t = (30 + s * 7 / 8 / 300e3) * (0.6 if k % 2 else 1.5)
        lines.append("%12d %12d float none -1 %10.2f 1 1 0 %10.2f 1 1 0" % (s, s // 4, t, t))
    log.write_text("\n".join(lines) + "\n")
    out = tmp_path / "cal.json"
    system = src / "configs/systems/cluster_4x_dgx_h100.json"
    with pytest.raises(perfcast.FitRefused) as e:
        perfcast.calibrate_comms(system, log, out=out)
    assert "held-out geomean |error|" in str(e.value)
    assert e.value.report["written"] is None and len(e.value.report["refused"]) == 1
    assert not out.exists()
    assert perfcast.calibrate_comms(system, log, out=out, force=True)["written"] == str(out)
    assert out.exists()


def test_calibrate_kernels_and_runtime_equal_the_cli(src, cli, tmp_path):
    # 30 streaming-kernel measurements at 90% of the H100 SXM's 3.35 TB/s plus 3 us (as in
    # tests/cli/cli_test.sh): the fitted memory efficiency is 0.9 by construction.
    m = tmp_path / "m.jsonl"
    rows = []
    for i in range(1, 31):
        n = i * 100000
        t_us = 3 + n * 12 / (3.35e12 * 0.9) * 1e6
        rows.append(json.dumps({"schema": "perfcast.measurement", "schema_version": "1.0",
                                "kernel": {"family": "elementwise", "op": "add", "elements": n, "flops_per_element": 1,
                                           "bytes_per_element": 12},
                                "timing": {"timer": "cupti", "repetitions": 3, "median": "%.6fus" % t_us},
                                "device": {"name": "test GPU"}}))
    m.write_text("\n".join(rows) + "\n")
    h100 = src / "configs/systems/h100_sxm.json"
    out = tmp_path / "cal.json"
    try:
        expected = run_cli(cli, "calibrate", "kernels", "--system", h100, "--measurements", m, "--out", out, "--json", "-")
    except subprocess.CalledProcessError as e:
        pytest.fail(e.stderr)
    cli_file = json.loads(out.read_text())
    assert without_date(perfcast.calibrate_kernels(h100, m, out=out)) == without_date(expected)
    assert expected["families"][0]["family"] == "elementwise" and expected["written"] == str(out)
    written = json.loads(out.read_text())
    assert abs(written["families"][0]["memory_efficiency"] - 0.9) < 1e-6
    assert written == cli_file
    # runtime: six DLRM runs "measured" as perfcast predicts them with 123 us per op (as in
    # tests/cli/calibrate_runtime_test.sh): the fit recovers it, and equals the CLI's.
    dgx = src / "configs/systems/dgx_h100.json"
    wl = src / "configs/workloads/dlrm_default.json"
    lines = ["workload,measured,set"]
    for b in (1024, 2048, 4096, 8192, 16384, 32768):
        t = perfcast.predict(dgx, wl, overrides={"workload.batch_size": b, "runtime.host.op_overhead": "123us"})["iteration_time_s"]
        lines.append("%s,%r,workload.batch_size=%d" % (wl, t, b))
    runs = tmp_path / "runs.csv"
    runs.write_text("\n".join(lines) + "\n")
    profile = tmp_path / "mystack.json"
    expected = run_cli(cli, "calibrate", "runtime", "--system", dgx, "--measurements", runs, "--out", profile, "--json", "-")
    profile.unlink()
    got = perfcast.calibrate_runtime(dgx, runs, profile)
    assert without_date(got) == without_date(expected)
    assert abs(got["op_overhead_s"] / 123e-6 - 1) < 0.005 and got["written"] == str(profile) and profile.exists()
    # runtime: a bad measurements file is a ConfigError naming it, nothing written.
    bad = tmp_path / "runs.csv"
    bad.write_text("workload,measured\nconfigs/workloads/dlrm_default.json,oops\n")
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.calibrate_runtime(h100, bad, tmp_path / "mine.json")
    assert "runs.csv" in str(e.value)
    assert not (tmp_path / "mine.json").exists()
    with pytest.raises(perfcast.ConfigError):
        perfcast.calibrate_runtime(h100, bad, tmp_path / "not a name.json")


def test_gpu_commands_check_inputs_and_equal_the_cli_without_a_gpu(src, cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFCAST_EXECUTABLE", cli)
    sweeps = [src / "configs/sweeps/gemm.json", src / "configs/sweeps/memcpy.json"]
    got = perfcast.profile(sweeps, dry_run=True)
    got_cases = got["cases"]
    expected = run_cli(cli, "profile", "--sweep", sweeps[0], "--sweep", sweeps[1], "--dry-run", "--json", "-")
    assert without_date(got) == without_date(expected)
    assert got["cases"] == sum(s["cases"] for s in got["sweeps"]) and got["sweeps"][0]["cases"] == 6000
    h100 = src / "configs/systems/h100_sxm.json"
    got = perfcast.validate(h100, configs=3, seed=7, dry_run=True)
    expected = run_cli(cli, "validate", "--system", h100, "--configs", 3, "--seed", 7, "--dry-run", "--json", "-")
    for r in (got, expected):
        r.pop("date")
    assert without_date(got) == without_date(expected)
    assert len(got["results"]) == 3 and all(r["predicted_s"] > 0 for r in got["results"])
    small = src / "tests/data/validation_results_small.jsonl"
    assert without_date(perfcast.validate(summarize=small)) == without_date(run_cli(cli, "validate", "--summarize", small, "--json", "-"))
    a100, runs = src / "configs/systems/a100_sxm.json", src / "tests/data/pytorch_results_small.jsonl"
    assert without_date(perfcast.validate(a100, compare=runs)) == \
        without_date(run_cli(cli, "validate", "--system", a100, "--compare", runs, "--json", "-"))
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.run(h100, tmp_path / "missing.json")
    assert "missing.json" in str(e.value)
    with pytest.raises(perfcast.ConfigError):
        perfcast.profile(tmp_path / "no_sweep.json", dry_run=True)
    # timeout= is the command's --timeout: a generous one changes nothing.
    assert perfcast.profile(sweeps, dry_run=True, timeout="60s")["cases"] == got_cases


def test_run_without_a_gpu_raises_after_checking_inputs(src, cli, monkeypatch):
    import shutil
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU may be present: perfcast run would measure (see the [gpu] tests)")
    monkeypatch.setenv("PERFCAST_EXECUTABLE", cli)
    with pytest.raises(RuntimeError) as e:
        perfcast.run(src / "configs/systems/h100_sxm.json", src / "configs/workloads/dlrm_default.json", iterations=2, warmup=0)
    assert "GPU" in str(e.value) and not isinstance(e.value, perfcast.ConfigError)
