"""Torch-free tests of embedding_bench.py: reading perfcast's embedding measurements, the
table grouping and the summary (python3 -m unittest discover -s validation/pytorch)."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import embedding_bench as eb  # noqa: E402
import workload_io as wio  # noqa: E402


def line(kernel, median="12.5us"):
    return json.dumps({"schema": "perfcast.measurement", "schema_version": "1.0", "kernel": kernel,
                       "timing": {"timer": "cupti", "repetitions": 10, "median": median},
                       "device": {"name": "NVIDIA H100 80GB HBM3"}}) + "\n"


FWD = {"family": "embedding_forward", "batch": 512, "weight_dtype": "fp16", "optimizer": "sgd", "index_bytes": 8,
       "tables": [{"rows": 1000, "dim": 64, "pooling": 3.5, "distribution": {"kind": "zipf", "alpha": 1.05}},
                  {"rows": 50, "dim": 128, "pooling": 1, "distribution": {"kind": "uniform"}},
                  {"rows": 7, "dim": 64, "pooling": 2, "distribution": {"kind": "hot_set", "hot_rows": 0.1,
                                                                        "hot_accesses": 0.9}}]}


class ReadTest(unittest.TestCase):
    def write(self, text):
        f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_forward_lines_only(self):
        bwd = dict(FWD, family="embedding_backward")
        gemm = {"family": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "fp16"}
        path = self.write(line(gemm) + line(bwd) + "\n" + line(FWD, "0.25ms"))
        got = eb.read_forward_configs(path)
        self.assertEqual([n for n, _ in got], [4])
        cfg = got[0][1]
        self.assertEqual(cfg["batch"], 512)
        self.assertEqual(cfg["weight_dtype"], "fp16")
        self.assertAlmostEqual(cfg["perfcast_s"], 0.25e-3)
        self.assertEqual([t["rows"] for t in cfg["tables"]], [1000, 50, 7])
        self.assertEqual(cfg["tables"][0]["distribution"], {"kind": "zipf", "alpha": 1.05})
        self.assertEqual(cfg["device"], "NVIDIA H100 80GB HBM3")

    def test_bad_lines_name_file_line_and_key(self):
        bad = dict(FWD, tables=[{"rows": 0, "dim": 64, "pooling": 1}])
        path = self.write(line(FWD) + line(bad))
        with self.assertRaises(wio.WorkloadError) as e:
            eb.read_forward_configs(path)
        self.assertIn(":2: /kernel/tables/0/rows", str(e.exception))
        path = self.write("{not json\n")
        with self.assertRaises(wio.WorkloadError) as e:
            eb.read_forward_configs(path)
        self.assertIn(":1: /: not JSON", str(e.exception))
        path = self.write(line(dict(FWD, weight_dtype="fp8")))
        with self.assertRaisesRegex(wio.WorkloadError, "/kernel/weight_dtype"):
            eb.read_forward_configs(path)
        path = self.write(line(FWD, "-3us"))
        with self.assertRaisesRegex(wio.WorkloadError, "/timing/median"):
            eb.read_forward_configs(path)

    def test_seconds(self):
        self.assertAlmostEqual(eb.parse_seconds("12.5us"), 12.5e-6)
        self.assertAlmostEqual(eb.parse_seconds("3ms"), 3e-3)
        self.assertAlmostEqual(eb.parse_seconds("800ns"), 8e-7)
        self.assertAlmostEqual(eb.parse_seconds(0.5), 0.5)
        for bad in ("", "us", "5 parsecs", 0, -1, True, None):
            with self.assertRaises(wio.WorkloadError):
                eb.parse_seconds(bad)


class LayoutTest(unittest.TestCase):
    def test_groups_and_row_offsets(self):
        tables = FWD["tables"]
        self.assertEqual(eb.dim_groups(tables), [(64, [0, 2]), (128, [1])])
        self.assertEqual(eb.table_row_offsets([tables[0], tables[2]]), [0, 1000])

    def test_summary(self):
        s = eb.summarize([2.0, 0.5, 1.0, 4.0])
        self.assertEqual(s["configs"], 4)
        self.assertAlmostEqual(s["geomean_torch_over_perfcast"], (2.0 * 0.5 * 1.0 * 4.0) ** 0.25)
        self.assertEqual(s["perfcast_not_slower"], 3)
        self.assertIsNone(eb.summarize([])["geomean_torch_over_perfcast"])


if __name__ == "__main__":
    unittest.main()
