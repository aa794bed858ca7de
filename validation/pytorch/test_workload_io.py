"""Tests of the torch-free parts of the PyTorch benchmarks (no torch needed):
    python3 -m unittest discover -s validation/pytorch -p 'test_*.py'
"""

import json
import math
import os
import tempfile
import unittest

import workload_io as wio

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
WORKLOADS = os.path.join(ROOT, "configs", "workloads")


class ShippedWorkloads(unittest.TestCase):
    def test_dlrm_files(self):
        w = wio.read_dlrm(wio.load_json(os.path.join(WORKLOADS, "dlrm_default.json")))
        self.assertEqual(w["batch_size"], 2048)
        self.assertEqual(len(w["tables"]), 8)  # "repeat": 8 expanded
        self.assertEqual(w["tables"][7]["name"], "table_7")
        self.assertEqual((w["tables"][0]["rows"], w["tables"][0]["dim"], w["tables"][0]["pooling"]), (1000000, 64, 100.0))
        self.assertEqual(w["gradient_bucket"], 25e6)
        ddp = wio.read_dlrm(wio.load_json(os.path.join(WORKLOADS, "dlrm_ddp.json")))
        self.assertEqual(ddp["tables"][0]["distribution"], {"kind": "zipf", "alpha": 1.05})
        mlperf = wio.read_dlrm(wio.load_json(os.path.join(WORKLOADS, "dlrm_mlperf.json")))
        self.assertEqual(len(mlperf["tables"]), 26)
        self.assertEqual(mlperf["embedding_optimizer"], "rowwise_adagrad")

    def test_gpt2(self):
        w = wio.read_transformer(wio.load_json(os.path.join(WORKLOADS, "gpt2.json")))
        self.assertEqual((w["hidden"], w["heads"], w["layers"], w["seq_len"], w["vocab"]), (768, 12, 12, 1024, 50257))
        self.assertEqual(w["ffn_hidden"], 4 * 768)
        self.assertEqual(w["kv_heads"], 12)
        self.assertEqual(w["precision"], "bf16")
        self.assertEqual(wio.gpt_single_gpu_steps(w), 256 // 8)

    def test_every_shipped_workload_reads(self):
        for f in sorted(os.listdir(WORKLOADS)):
            doc = wio.load_json(os.path.join(WORKLOADS, f))
            if doc["model"] == "dlrm":
                self.assertGreater(len(wio.read_dlrm(doc, f)["tables"]), 0)
            else:
                self.assertGreater(wio.read_transformer(doc, f)["layers"], 0)


class BadInput(unittest.TestCase):
    def test_errors_name_file_and_path(self):
        doc = wio.load_json(os.path.join(WORKLOADS, "dlrm_default.json"))
        doc["embedding"]["tables"][0]["rows"] = -1
        with self.assertRaisesRegex(wio.WorkloadError, r"x.json: /embedding/tables/0/rows: expected an integer"):
            wio.read_dlrm(doc, "x.json")
        doc = wio.load_json(os.path.join(WORKLOADS, "dlrm_default.json"))
        doc["embedding"]["tables"][0]["dim"] = 32  # bottom MLP ends at 64
        with self.assertRaisesRegex(wio.WorkloadError, "dot interaction"):
            wio.read_dlrm(doc, "x.json")
        with self.assertRaisesRegex(wio.WorkloadError, '/gradient_bucket: expected a size such as "25MB"'):
            wio.parse_bytes("25 parsecs", "x.json", "/gradient_bucket")
        gpt = wio.load_json(os.path.join(WORKLOADS, "gpt2.json"))
        gpt["parallelism"]["tp"] = 2
        with self.assertRaisesRegex(wio.WorkloadError, "/parallelism: a single-GPU step needs tp = pp = 1"):
            wio.gpt_single_gpu_steps(wio.read_transformer(gpt, "g.json"), "g.json")
        with self.assertRaisesRegex(wio.WorkloadError, "cannot open the file"):
            wio.load_json(os.path.join(WORKLOADS, "nope.json"))

    def test_result_lines(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "r.jsonl")
            cfg = wio.load_json(os.path.join(WORKLOADS, "dlrm_ddp.json"))
            with open(p, "w") as f:
                f.write(json.dumps({"schema": "perfcast.validation_result", "index": 0, "config": cfg}) + "\n\n")
                f.write("{broken\n")
            with self.assertRaisesRegex(wio.WorkloadError, "r.jsonl line 3"):
                wio.read_results(p)
            with open(p, "w") as f:
                f.write(json.dumps({"schema": "perfcast.validation_result", "index": 0, "config": cfg}) + "\n")
            lines = wio.read_results(p)
            self.assertEqual(lines[0][0], 1)
            self.assertEqual(len(wio.read_dlrm(lines[0][1]["config"])["tables"]), 8)


class Samplers(unittest.TestCase):
    def test_uniform_and_bounds(self):
        d = {"kind": "uniform"}
        self.assertEqual(wio.sample_row(d, 10, 0.0), 0)
        self.assertEqual(wio.sample_row(d, 10, 0.999999), 9)
        self.assertEqual(wio.sample_row(d, 10, 0.55), 5)

    def test_zipf_inverse_cdf(self):
        # alpha 2 on [1, n + 1): x = 1 / (1 - u (1 - 1/(n+1))); u = 0.5, n = 9 -> x = 1/(1 - 0.45) = 1.818 -> rank 0.
        d = {"kind": "zipf", "alpha": 2.0}
        self.assertEqual(wio.sample_row(d, 9, 0.5), 0)
        self.assertEqual(wio.sample_row(d, 9, 0.95), 5)  # x = 1 / (1 - 0.855) = 6.9 -> floor 6 -> rank 5
        # alpha 1: x = (n + 1)^u; u = 0.5, n = 99 -> x = 10 -> rank 9.
        self.assertEqual(wio.sample_row({"kind": "zipf", "alpha": 1.0}, 99, 0.5), 9)
        rows = [wio.sample_row(d, 1000, (i + 0.5) / 1000) for i in range(1000)]
        self.assertEqual(min(rows), 0)
        self.assertLess(max(rows), 1000)
        self.assertGreater(rows.count(0), 400)  # P(rank 0) = (1 - 1/2) / (1 - 1/1001) ~ 0.5

    def test_hot_set(self):
        d = {"kind": "hot_set", "hot_rows": 0.01, "hot_accesses": 0.9}
        self.assertEqual(wio.hot_rows(d, 1000), 10)
        self.assertEqual(wio.sample_row(d, 1000, 0.45), 5)          # hot: 0.45 / 0.9 x 10 rows
        self.assertEqual(wio.sample_row(d, 1000, 0.955), 10 + 544)  # cold: 10 + 0.55 x 990 = 554.5 rows
        self.assertEqual(wio.hot_rows({"hot_rows": 1e-9}, 100), 1)       # at least one hot row

    def test_bag_length_mean(self):
        self.assertEqual(wio.bag_length(3.0, 0.99), 3)
        self.assertEqual(wio.bag_length(2.25, 0.2), 3)
        self.assertEqual(wio.bag_length(2.25, 0.3), 2)
        n = 1000
        mean = sum(wio.bag_length(2.25, (i + 0.5) / n) for i in range(n)) / n
        self.assertTrue(math.isclose(mean, 2.25, abs_tol=1e-9))


class Timing(unittest.TestCase):
    def test_percentiles(self):
        s = wio.timing_summary([5.0, 1.0, 3.0, 2.0, 4.0])
        self.assertEqual(s["median_s"], 3.0)
        self.assertAlmostEqual(s["p10_s"], 1.4)  # (5 - 1) * 0.1 = 0.4 between 1 and 2
        self.assertAlmostEqual(s["p90_s"], 4.6)
        self.assertEqual(s["iterations"], 5)

    def test_append_jsonl(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "sub", "t.jsonl")
            wio.append_jsonl(p, {"a": 1})
            wio.append_jsonl(p, {"a": 2})
            with open(p) as f:
                self.assertEqual([json.loads(x)["a"] for x in f], [1, 2])


if __name__ == "__main__":
    unittest.main()
