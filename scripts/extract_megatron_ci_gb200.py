#!/usr/bin/env python3
"""Builds data/public-measurements/megatron_ci_gb200.csv: Megatron-LM's CI functional tests
on DGX GB200, for the test cases whose DGX H100 rows are in megatron_ci_step_times.csv.

A test case's configuration (its model_config.yaml) is the same on every platform; only its
golden values and its recipe's GPU count differ. So each row copies the configuration columns
of the test case's DGX H100 row and takes from the GB200 side, at the same commit:
  - the GPUs: the recipe of tests/test_utils/recipes/gb200/ that lists the test case for
    platform dgx_gb200 (nodes x gpus; a test case listed in recipes of different GPU counts
    is left out), and dp = GPUs / (tp x pp x cp);
  - the step time: the median of the logged `iteration-time` values of
    golden_values_dev_dgx_gb200.json after the first logged one (the warm-up step);
  - the memory of the last rank: the last logged `mem-allocated-bytes` and
    `mem-max-allocated-bytes` (as scripts/extract_megatron_ci_memory.py).
Rows whose GB200 golden file or recipe is missing are left out.

Usage: scripts/extract_megatron_ci_gb200.py MEGATRON_LM_GIT_DIR [OUT_CSV]
Needs Python's yaml module (Debian: python3-yaml). Exit 2 on unreadable or malformed input.
"""
import subprocess

import yaml

from megatron_ci_golden import (URL, arguments, fail, finite_series, git_show, load_golden, read_step_times,
                                steady_step_time, write_csv)

H100_GOLDEN = 'golden_values_dev_dgx_h100.json'
GB200_GOLDEN = 'golden_values_dev_dgx_gb200.json'
RECIPES = 'tests/test_utils/recipes/gb200'


def recipe_gpus(git, commit):
    """test case -> GPUs of the dgx_gb200 recipes that list it (a set: several recipes may)."""
    listing = subprocess.run(['git', '-C', git, 'ls-tree', '--name-only', commit, RECIPES + '/'],
                             capture_output=True, text=True)
    if listing.returncode != 0:
        fail(f'{git}: cannot list {commit}:{RECIPES}')
    gpus = {}
    for path in listing.stdout.split():
        if not path.endswith('.yaml'):
            continue
        try:
            doc = yaml.safe_load(git_show(git, commit, path))
        except yaml.YAMLError as e:
            fail(f'{path}: not YAML: {e}')
        spec = doc.get('spec', {}) if isinstance(doc, dict) else {}
        if not isinstance(spec.get('nodes'), int) or not isinstance(spec.get('gpus'), int):
            continue
        n = spec['nodes'] * spec['gpus']
        for product in doc.get('products', []) or []:
            platforms = [p for inner in product.get('products', []) for p in inner.get('platforms', [])]
            if 'dgx_gb200' not in platforms:
                continue
            for case in product.get('test_case', []):
                gpus.setdefault(case, set()).add((n, path))
    return gpus


def main():
    git, out = arguments('extract_megatron_ci_gb200.py', 'data/public-measurements/megatron_ci_gb200.csv')
    header, rows = read_step_times()
    by_commit = {}
    written, skipped = [], {}
    seen = set()
    for row in rows:
        m = URL.match(row['source'])
        if not m or not m.group(2).endswith(H100_GOLDEN):
            continue
        commit, path = m.groups()
        gb_path = path[:-len(H100_GOLDEN)] + GB200_GOLDEN
        if gb_path in seen:
            continue
        seen.add(gb_path)
        text = git_show(git, commit, gb_path)
        if text is None:
            skipped['no GB200 golden values'] = skipped.get('no GB200 golden values', 0) + 1
            continue
        if commit not in by_commit:
            by_commit[commit] = recipe_gpus(git, commit)
        case = path.split('/')[-2]
        listed = by_commit[commit].get(case, set())
        counts = {n for n, _ in listed}
        if len(counts) != 1:
            why = 'no dgx_gb200 recipe lists it' if not counts else 'recipes of different GPU counts'
            skipped[why] = skipped.get(why, 0) + 1
            continue
        gpus = counts.pop()
        recipe = sorted(p for _, p in listed)[0]
        url = f'https://github.com/NVIDIA/Megatron-LM/blob/{commit}/{gb_path}'
        doc = load_golden(text, url)
        steady = steady_step_time(doc, url)
        current = finite_series(doc, 'mem-allocated-bytes', url)
        peak = finite_series(doc, 'mem-max-allocated-bytes', url)
        if steady is None or not current or not peak:
            skipped['too few logged values'] = skipped.get('too few logged values', 0) + 1
            continue
        model_parallel = int(row['tp']) * int(row['pp']) * int(row['cp'] or 1)
        if gpus % model_parallel:
            skipped['GPUs not a multiple of tp x pp x cp'] = skipped.get('GPUs not a multiple of tp x pp x cp', 0) + 1
            continue
        new = dict(row)
        new.update({
            'source': url, 'gpu': 'GB200 (DGX GB200)', 'gpus': str(gpus), 'nodes': str(gpus // 4),
            'dp': str(gpus // model_parallel), 'step_time_s': f'{steady[0]:.6g}',
            'step_time_basis': f"median of the {steady[1]} logged 'iteration-time' golden values after the first",
            'notes': f'configuration as the DGX H100 row of the same test case (same model_config.yaml); GPUs from '
                     f'{recipe} (nodes x gpus); memory of the last rank, bytes allocated (current / peak) at steps '
                     f'{current[-1][0]} / {peak[-1][0]}',
            'mem_allocated_bytes': str(int(current[-1][1])), 'mem_max_allocated_bytes': str(int(peak[-1][1])),
        })
        written.append(new)
    if not written:
        fail('no GB200 row found')
    write_csv(out, header + ['mem_allocated_bytes', 'mem_max_allocated_bytes'], written)
    print(f'{out}: {len(written)} rows; left out: ' + ', '.join(f'{n} ({why})' for why, n in sorted(skipped.items())))


if __name__ == '__main__':
    main()
