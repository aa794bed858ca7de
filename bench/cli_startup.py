#!/usr/bin/env python3
"""Per-call cost of the perfcast command: process CPU time (user + system), wall time and
peak memory of `perfcast --version` and of a DLRM `predict`, each run N times in a row.

Usage: bench/cli_startup.py [--perfcast build/cli/perfcast] [--runs 20]

Prints, per command, the median and the 10th / 90th percentiles. Process time is what the
child processes used (resource.getrusage(RUSAGE_CHILDREN) before and after each run), so a
busy machine inflates wall time more than process time. The command is docs/benchmarks.md's
"Start-up and per-call cost"."""
import argparse
import pathlib
import resource
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = [
    ('--version', ['--version']),
    ('predict dlrm_default on dgx_h100', ['predict', '--system', 'configs/systems/dgx_h100.json',
                                          '--workload', 'configs/workloads/dlrm_default.json']),
    ('predict dlrm_default --json -', ['predict', '--system', 'configs/systems/dgx_h100.json',
                                       '--workload', 'configs/workloads/dlrm_default.json', '--json', '-']),
]


def measure(command, runs):
    cpu, wall, rss = [], [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        r = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            raise SystemExit(f'{" ".join(command)}: exit {r.returncode}')
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        rss.append(after.ru_maxrss)  # KiB, the largest child so far
    return cpu, wall, max(rss)


def quantiles(values):
    values = sorted(values)
    pick = lambda q: values[min(len(values) - 1, int(q * len(values)))]
    return statistics.median(values), pick(0.1), pick(0.9)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--perfcast', default=str(ROOT / 'build/cli/perfcast'))
    parser.add_argument('--runs', type=int, default=20)
    args = parser.parse_args()
    print(f'{args.perfcast}, {args.runs} runs each')
    print(f'{"command":<36} {"process ms (p10-p90)":>24} {"wall ms (p10-p90)":>22} {"peak MiB":>9}')
    for name, argv in CASES:
        cpu, wall, rss = measure([args.perfcast] + argv, args.runs)
        c, w = quantiles(cpu), quantiles(wall)
        print(f'{name:<36} {c[0] * 1e3:10.1f} ({c[1] * 1e3:5.1f}-{c[2] * 1e3:5.1f}) '
              f'{w[0] * 1e3:9.1f} ({w[1] * 1e3:5.1f}-{w[2] * 1e3:5.1f}) {rss / 1024:9.1f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
