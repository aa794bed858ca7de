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
from megatron_ci_golden import STEP_TIMES, URL, arguments, fail, finite_series, git_show, load_golden, read_step_times, write_csv

SERIES = ('mem-allocated-bytes', 'mem-max-allocated-bytes')


def main():
    git, out = arguments('extract_megatron_ci_memory.py', 'data/public-measurements/megatron_ci_memory.csv')
    sources = [r['source'] for r in read_step_times()[1]]
    rows = []
    for line, url in enumerate(sources, start=2):
        m = URL.match(url)
        if not m:
            fail(f'{STEP_TIMES}:{line}: source is not a Megatron-LM GitHub URL at a commit: {url}')
        commit, path = m.groups()
        text = git_show(git, commit, path)
        if text is None:
            fail(f'{git}: cannot read {commit}:{path}')
        doc = load_golden(text, url)
        current, peak = (finite_series(doc, k, url) for k in SERIES)
        if not current or not peak:
            continue  # a golden file without memory series
        rows.append({'source': url, 'step_times_line': line, 'rank': 'last (world_size - 1)',
                     'allocated_step': current[-1][0], 'mem_allocated_bytes': int(current[-1][1]),
                     'peak_step': peak[-1][0], 'mem_max_allocated_bytes': int(peak[-1][1])})
    write_csv(out, list(rows[0].keys()), rows)
    print(f'{out}: {len(rows)} rows of {len(sources)} step-time rows')


if __name__ == '__main__':
    main()
