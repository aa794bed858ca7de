"""What scripts/extract_megatron_ci_memory.py and extract_megatron_ci_gb200.py share: reading
Megatron-LM's CI golden-values files from a git clone, and writing a CSV whole or not at all."""
import csv
import json
import math
import statistics
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
STEP_TIMES = ROOT / 'data/public-measurements/megatron_ci_step_times.csv'
# A step-time row's source: a golden-values file of NVIDIA/Megatron-LM at one commit.
URL = re.compile(r'https://github.com/NVIDIA/Megatron-LM/blob/([0-9a-f]{40})/(.+)$')


def fail(msg):
    """Exit 2 with the reason (the project's exit code for bad input)."""
    print(f'error: {msg}', file=sys.stderr)
    sys.exit(2)


def arguments(script, default_out):
    """(Megatron-LM git dir, output path) from the command line."""
    if len(sys.argv) < 2:
        fail(f'usage: {script} MEGATRON_LM_GIT_DIR [OUT_CSV]')
    return sys.argv[1], pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / default_out


def git_show(git, commit, path):
    """The file's text at the commit, or None when the clone does not have it."""
    done = subprocess.run(['git', '-C', git, 'show', f'{commit}:{path}'], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def finite_series(doc, key, where):
    """(step, value) pairs of one golden-values series in step order, 'nan' entries dropped;
    [] when the file has no such series. Exit 2 on a value that is not a non-negative number."""
    series = doc.get(key)
    if series is None:
        return []
    values = series.get('values')
    if not isinstance(values, dict):
        fail(f'{where}: /{key}/values: expected an object of step: value')
    out = []
    for step, v in values.items():
        if v == 'nan':
            continue
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            fail(f'{where}: /{key}/values/{step}: expected a non-negative number, got {v!r}')
        out.append((int(step), float(v)))
    return sorted(out)


def write_csv(out, fieldnames, rows):
    """Writes the rows through a temporary file, so a failed run leaves the old file whole."""
    tmp = out.with_suffix('.csv.tmp')
    with open(tmp, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=fieldnames, lineterminator='\n')
        w.writeheader()
        w.writerows(rows)
    tmp.replace(out)


def read_step_times():
    """(column names, rows) of data/public-measurements/megatron_ci_step_times.csv."""
    with open(STEP_TIMES, newline='') as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def load_golden(text, url):
    """A golden-values file's JSON; exit 2 when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        fail(f'{url}: not JSON: {e}')


def steady_step_time(doc, url):
    """(median, count) of the logged `iteration-time` values after the first one (the warm-up
    step), or None when fewer than two are logged."""
    times = [v for _, v in finite_series(doc, 'iteration-time', url)]
    if len(times) < 2:
        return None
    return statistics.median(times[1:]), len(times) - 1
