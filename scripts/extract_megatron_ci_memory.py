#!/usr/bin/env python3
"""Extracts the memory figures of Megatron-LM's CI golden values into
data/public-measurements/megatron_ci_memory.csv.

Every row of data/public-measurements/megatron_ci_step_times.csv names the golden-values file
it was read from (a GitHub URL at one commit of NVIDIA/Megatron-LM). The same files hold two
memory series, written by megatron/training/training.py (training_log, at that commit) from
torch.cuda.memory_stats() of the rank that owns the TensorBoard writer, the last rank
(world_size - 1; megatron/training/global_vars.py _set_tensorboard_writer):
  mem-allocated-bytes      allocated_bytes.all.current when the step is logged (after the
                           optimizer step: weights, gradient buffers, optimizer states and what
                           else stays allocated between steps)
  mem-max-allocated-bytes  allocated_bytes.all.peak, the peak since the process started
This script keeps, per row, the value at the last logged step of each series (the peak series
never falls, so its last value is its maximum) and the step it was logged at.

Usage: scripts/extract_megatron_ci_memory.py MEGATRON_LM_GIT_DIR [OUT_CSV]
  MEGATRON_LM_GIT_DIR: a clone of NVIDIA/Megatron-LM (bare or not) holding the commits the
  step-time rows name. OUT_CSV defaults to data/public-measurements/megatron_ci_memory.csv.
Exit 2 when a file cannot be read or a value is not a number.
"""
import csv
import json
import math
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
STEP_TIMES = ROOT / 'data/public-measurements/megatron_ci_step_times.csv'
URL = re.compile(r'https://github.com/NVIDIA/Megatron-LM/blob/([0-9a-f]{40})/(.+)$')
SERIES = ('mem-allocated-bytes', 'mem-max-allocated-bytes')


def fail(msg):
    print(f'error: {msg}', file=sys.stderr)
    sys.exit(2)


def last_value(doc, key, where):
    """(step, value) of the last finite value of one series, or None when absent."""
    series = doc.get(key)
    if series is None:
        return None
    values = series.get('values')
    if not isinstance(values, dict):
        fail(f'{where}: /{key}/values: expected an object of step: value')
    best = None
    for step, v in values.items():
        if v == 'nan':
            continue
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            fail(f'{where}: /{key}/values/{step}: expected a non-negative number, got {v!r}')
        if best is None or int(step) > best[0]:
            best = (int(step), float(v))
    return best


def main():
    if len(sys.argv) < 2:
        fail('usage: extract_megatron_ci_memory.py MEGATRON_LM_GIT_DIR [OUT_CSV]')
    git = sys.argv[1]
    out = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / 'data/public-measurements/megatron_ci_memory.csv'
    with open(STEP_TIMES, newline='') as f:
        sources = [r['source'] for r in csv.DictReader(f)]
    rows = []
    for line, url in enumerate(sources, start=2):
        m = URL.match(url)
        if not m:
            fail(f'{STEP_TIMES}:{line}: source is not a Megatron-LM GitHub URL at a commit: {url}')
        commit, path = m.groups()
        shown = subprocess.run(['git', '-C', git, 'show', f'{commit}:{path}'], capture_output=True, text=True)
        if shown.returncode != 0:
            fail(f'{git}: cannot read {commit}:{path}: {shown.stderr.strip()}')
        try:
            doc = json.loads(shown.stdout)
        except json.JSONDecodeError as e:
            fail(f'{url}: not JSON: {e}')
        current, peak = (last_value(doc, k, url) for k in SERIES)
        if current is None or peak is None:
            continue  # a golden file without memory series
        rows.append({'source': url, 'step_times_line': line, 'rank': 'last (world_size - 1)',
                     'allocated_step': current[0], 'mem_allocated_bytes': int(current[1]),
                     'peak_step': peak[0], 'mem_max_allocated_bytes': int(peak[1])})
    tmp = out.with_suffix('.csv.tmp')
    with open(tmp, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator='\n')
        w.writeheader()
        w.writerows(rows)
    tmp.replace(out)
    print(f'{out}: {len(rows)} rows of {len(sources)} step-time rows')


if __name__ == '__main__':
    main()
