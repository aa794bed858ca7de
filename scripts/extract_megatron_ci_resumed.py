#!/usr/bin/env python3
"""Builds data/public-measurements/megatron_ci_resumed.csv: the second run of Megatron-LM's CI
checkpoint-resume tests, for the rows of megatron_ci_step_times.csv that have one.

A resume test trains, saves a checkpoint, and trains again from it in a new process; the
second run's golden values are in golden_values_<environment>_<platform>_2nd.json beside the
first run's (tests/functional_tests/test_cases/..., NVIDIA/Megatron-LM). Each row copies the
first run's row (the same test case, configuration and GPUs) and takes from the second run:
  - the step time: the median of its logged `iteration-time` values after the first one (the
    first step after loading);
  - the source URL, and a note naming the first run's line in megatron_ci_step_times.csv.

Usage: scripts/extract_megatron_ci_resumed.py MEGATRON_LM_GIT_DIR [OUT_CSV]
Exit 2 on unreadable or malformed input.
"""
from megatron_ci_golden import STEP_TIMES, URL, arguments, fail, git_show, load_golden, read_step_times, steady_step_time, write_csv


def main():
    git, out = arguments('extract_megatron_ci_resumed.py', 'data/public-measurements/megatron_ci_resumed.csv')
    header, rows = read_step_times()
    written = []
    for line, row in enumerate(rows, start=2):
        m = URL.match(row['source'])
        if not m or not m.group(2).endswith('.json'):
            fail(f'{STEP_TIMES}:{line}: source is not a Megatron-LM golden-values file at a commit')
        commit, path = m.groups()
        second = path[:-len('.json')] + '_2nd.json'
        text = git_show(git, commit, second)
        if text is None:
            continue
        url = f'https://github.com/NVIDIA/Megatron-LM/blob/{commit}/{second}'
        steady = steady_step_time(load_golden(text, url), url)
        if steady is None or steady[1] < 2:
            continue
        new = dict(row)
        new.update({
            'source': url, 'step_time_s': f'{steady[0]:.6g}',
            'step_time_basis': f"median of the {steady[1]} logged 'iteration-time' golden values of the resumed run "
                               'after its first',
            'notes': f'the second (resumed) run of the checkpoint-resume test whose first run is '
                     f'megatron_ci_step_times.csv line {line}; configuration and GPUs as there',
        })
        written.append(new)
    if not written:
        fail('no resumed run found')
    write_csv(out, header, written)
    print(f'{out}: {len(written)} rows of {len(rows)} step-time rows')


if __name__ == '__main__':
    main()
