#!/usr/bin/env python3
"""Recomputes perfcast's accuracy claims from the public measurements in data/ and rewrites
the tables that state them: the README's "What is measured" table and the summary table of
docs/accuracy.md (generated blocks, scripts/generated_blocks.py).

Every number in those tables comes from a command run here, on the data kept in the
repository: the accuracy checks of bench/ (`--json`) and perfcast's own commands (`replay`,
`calibrate comms`). The commands are listed in docs/accuracy.md.

Usage: scripts/accuracy_tables.py BUILD [--check]
  BUILD: a build folder with the perfcast command and the bench tools
         (`cmake --build BUILD --target perfcast perfcast_accuracy_tools`).
  --check: write nothing; exit 1 with a diff when a committed table differs from what the
           code computes now (ctest perfcast_accuracy_tables). Without it: `make accuracy`."""
import argparse
import csv
import functools
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from generated_blocks import pages, update_blocks  # noqa: E402

SCRIPT = 'scripts/accuracy_tables.py'
ROOT = pathlib.Path(__file__).resolve().parent.parent
HTA = 'data/hta-a100-dlrm-rank3/control.json.gz'
PARAM = 'data/param-dlrm-v100-8rank'


class Runner:
    """Runs perfcast and the bench tools of one build, from the repository root."""

    def __init__(self, build):
        self.build = pathlib.Path(build).resolve()
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix='perfcast-accuracy-'))

    def tool(self, name):
        path = self.build / ('cli' if name == 'perfcast' else 'bench') / name
        if not path.exists():
            raise SystemExit(f'{path} is missing: build it (cmake --build {self.build} --target perfcast '
                             'perfcast_accuracy_tools)')
        return str(path)

    def json(self, name, *args, ok=(0,)):
        """Runs the tool with `--json FILE` appended and returns the parsed file."""
        out = self.tmp / f'{name}-{abs(hash(args))}.json'
        argv = [self.tool(name), *args, '--json', str(out)]
        r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
        if r.returncode not in ok or not out.exists():
            raise SystemExit(f'{" ".join(argv)}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}')
        return json.loads(out.read_text())


def pct(x, digits=1):
    return f'{100 * x:.{digits}f}%'


def spct(x, digits=1):
    return f'{100 * x:+.{digits}f}%'


def span(values, digits=1):
    """'1.2-1.9%' (or '1.2%' when they agree to the digits shown)."""
    lo, hi = f'{100 * min(values):.{digits}f}', f'{100 * max(values):.{digits}f}'
    return f'{lo}%' if lo == hi else f'{lo}-{hi}%'


# ---- the checks: each runs once and returns numbers (fractions, seconds) ------------------

@functools.lru_cache(maxsize=None)
def comms_one_node(r):
    """Leave one source out on the one-node all-reduce tables (Hopper, A100)."""
    hopper = r.json('perfcast', 'calibrate', 'comms', '--system', 'configs/systems/dgx_h100.json',
                    '--nccl-tests', 'data/public-measurements/nccl_h100_dev.csv', '--only', 'ND_H100', '--only', 'ND_H200',
                    '--only', 'p5.48xlarge', '--leave-one-source-out', '--force', '--out', str(r.tmp / 'h.comms.json'))
    a100 = r.json('perfcast', 'calibrate', 'comms', '--system', 'configs/systems/dgx_a100.json',
                  '--nccl-tests', 'data/public-measurements/nccl_a100_dev.csv', '--only', 'ND_A100',
                  *[a for n in range(2, 9) for a in ('--nccl-tests', f'data/vtrain-a100-gpt/AR_GPU{n}_1M_1024M_LUT.csv')],
                  '--leave-one-source-out', '--force', '--out', str(r.tmp / 'a.comms.json'))
    loso = lambda j: [s['calibrated_geomean_abs_error_from_1MiB'] for s in j['leave_one_source_out']]
    copy = lambda j: [s['spread']['copy_geomean_abs_error_from_1MiB'] for s in j['leave_one_source_out']
                      if s['spread'].get('shared_sizes_from_1MiB', 0) > 0]
    return {'hopper': loso(hopper), 'a100': loso(a100), 'a100_copy': copy(a100)}


@functools.lru_cache(maxsize=None)
def comms_two_nodes(r):
    """Two-node EFA all-reduce: the shipped fits' held-out sizes, the two p5 runs left out in
    turn, and the spec-derived model on every two-node table."""
    p5 = r.json('perfcast', 'calibrate', 'comms', '--system', 'configs/systems/aws_p5.json',
                '--nccl-tests', 'data/public-measurements/nccl_h100_dev.csv',
                '--nccl-tests', 'data/public-measurements/nccl_two_node_p5.csv',
                '--only', 'ND_H100', '--only', 'ND_H200', '--only', 'Slurm', '--force', '--out', str(r.tmp / 'p5.comms.json'))
    p4de = r.json('perfcast', 'calibrate', 'comms', '--system', 'configs/systems/aws_p4de.json',
                  '--nccl-tests', 'data/public-measurements/nccl_a100_dev.csv',
                  *[a for n in range(2, 9) for a in ('--nccl-tests', f'data/vtrain-a100-gpt/AR_GPU{n}_1M_1024M_LUT.csv')],
                  '--force', '--out', str(r.tmp / 'p4de.comms.json'))
    p5_loso = r.json('perfcast', 'calibrate', 'comms', '--system', 'configs/systems/aws_p5.json',
                     '--nccl-tests', 'data/public-measurements/nccl_two_node_p5.csv', '--leave-one-source-out',
                     '--force', '--out', str(r.tmp / 'p5l.comms.json'))
    p4de_loso = r.json('perfcast', 'calibrate', 'comms', '--system', 'configs/systems/aws_p4de.json',
                       '--nccl-tests', 'data/public-measurements/nccl_a100_dev.csv', '--only', 'p4de',
                       '--leave-one-source-out', '--force', '--out', str(r.tmp / 'p4del.comms.json'))
    held = lambda j: next(c['held_out']['fitted'] for c in j['collectives'] if c['multi_node'])
    sources = p5_loso['leave_one_source_out']
    return {'p5_held_out': held(p5), 'p4de_held_out': held(p4de),
            'p5_loso': [s['calibrated_geomean_abs_error_from_1MiB'] for s in sources if s['basis'] != 'spec-derived (no fit applies)'],
            'p5_copy': [s['spread']['copy_geomean_abs_error_from_1MiB'] for s in sources if s.get('spread')],
            'spec': [s['prior_geomean_abs_error_from_1MiB'] for s in sources + p4de_loso['leave_one_source_out']]}


@functools.lru_cache(maxsize=None)
def comms_infiniband(r):
    """H100 InfiniBand all-reduce tables at 2-128 nodes, each left out in turn: by node count,
    the errors of those a fit of the others applies to, and the spec-derived model's."""
    j = r.json('perfcast', 'calibrate', 'comms', '--system', 'configs/systems/cluster_4x_dgx_h100.json',
               '--nccl-tests', 'data/public-measurements/nccl_h100_infiniband.csv', '--leave-one-source-out',
               '--force', '--out', str(r.tmp / 'ib.comms.json'))
    calibrated, spec = {}, {}
    for x in j['leave_one_source_out']:
        spec.setdefault(x['nodes'], []).append(x['prior_geomean_abs_error_from_1MiB'])
        if not x['basis'].startswith('spec-derived'):
            calibrated.setdefault(x['nodes'], []).append(x['calibrated_geomean_abs_error_from_1MiB'])
    return {'tables': len(j['leave_one_source_out']), 'calibrated': calibrated, 'spec': spec}


@functools.lru_cache(maxsize=None)
def comms_nebius_shipped(r):
    """The shipped InfiniBand calibration (fitted on issue 309's default tables) against
    dstack's Nebius table, which no shipped fit saw: geomean and max |error| from 1 MiB."""
    measured = {}
    with open(ROOT / 'data/public-measurements/nccl_h100_infiniband.csv') as f:
        for row in csv.DictReader(f):
            if 'dstack' in row['source_url'] and float(row['bytes']) >= 2 ** 20:
                measured[float(row['bytes'])] = float(row['time_us']) * 1e-6
    j = r.json('perfcast', 'comm', '--system', 'configs/systems/cluster_4x_dgx_h100.json', '--collective', 'all_reduce',
               '--nodes', '2', '--ranks', '16', '--sizes', ','.join(f'{int(b)}B' for b in sorted(measured)))
    errors = [x['time_s'] / measured[x['bytes']] - 1 for x in j['results']]
    return {'geomean': geomean_abs(errors), 'max': max(abs(e) for e in errors), 'n': len(errors)}


@functools.lru_cache(maxsize=None)
def comms_b200(r):
    """Two HGX B200 nodes (dstack's Lambda and GCP A4 tables), each left out in turn."""
    j = r.json('perfcast', 'calibrate', 'comms', '--system', 'configs/systems/hgx_b200.json',
               '--nccl-tests', 'data/public-measurements/nccl_b200_two_node.csv', '--leave-one-source-out',
               '--force', '--out', str(r.tmp / 'b200.comms.json'))
    x = j['leave_one_source_out']
    return {'spec': [s['prior_geomean_abs_error_from_1MiB'] for s in x],
            'calibrated': [s['calibrated_geomean_abs_error_from_1MiB'] for s in x if not s['basis'].startswith('spec-derived')]}


@functools.lru_cache(maxsize=None)
def vtrain(r):
    shipped = r.json('perfcast_vtrain_check', '--runtime', 'megatron_deepspeed', '--worst', '0')
    nothing = r.json('perfcast_vtrain_check', '--worst', '0')
    return {'held_out': shipped['subsets']['held_out_4_8_gpus']['geomean_abs'], 'rows': shipped['values']['rows'],
            'nothing_fitted': nothing['subsets']['held_out_4_8_gpus']['geomean_abs']}


@functools.lru_cache(maxsize=None)
def replay(r):
    param_measured = r.json('perfcast', 'replay', '--kineto', f'{PARAM}/dlrm_kineto.tar.gz')
    hta_measured = r.json('perfcast', 'replay', '--kineto', HTA, '--steps', '1012-1014')
    param_predicted = r.json('perfcast', 'replay', '--kineto', f'{PARAM}/dlrm_kineto.tar.gz', '--et',
                             f'{PARAM}/dlrm_pytorch_et.tar.gz', '--kernels', 'predicted', '--system',
                             'configs/systems/dgx1_v100.json')
    hta_predicted = r.json('perfcast', 'replay', '--kineto', HTA, '--kernels', 'predicted', '--system',
                           'configs/systems/hgx_a100_40gb.json', '--steps', '1012-1014')
    held_steps = [s['error'] for s in hta_predicted['ranks'][0]['steps'] if s['step'] >= 1012]
    # Kernel families calibrated from the traces, on the parts the fits left out.
    param_cal = r.json('perfcast', 'replay', '--kineto', f'{PARAM}/dlrm_kineto.tar.gz', '--et',
                       f'{PARAM}/dlrm_pytorch_et.tar.gz', '--kernels', 'predicted', '--system',
                       'configs/systems/dgx1_v100.json', '--ranks', '4-7', '--calibration',
                       'configs/calibration/tesla_v100_sxm2_32gb.json')
    hta_cal = r.json('perfcast', 'replay', '--kineto', HTA, '--kernels', 'predicted', '--system',
                     'configs/systems/hgx_a100_40gb.json', '--steps', '1012-1014', '--calibration',
                     'configs/calibration/nvidia_a100_pg509_200.json')
    families = lambda j: {f['name']: f['geomean_abs_error'] for f in j['families']}
    return {'param_measured': param_measured['geomean_abs_error'], 'hta_measured': hta_measured['selected']['error'],
            'param_predicted': param_predicted['geomean_abs_error'], 'param_predicted_max': param_predicted['max_abs_error'],
            'hta_predicted': hta_predicted['selected']['error'], 'hta_held_steps': held_steps,
            'param_families': families(param_cal), 'hta_families': families(hta_cal)}


@functools.lru_cache(maxsize=None)
def embedding(r):
    j = r.json('perfcast_embedding_tier_check')
    rows = j['values']['rows']
    hbm = {(x['optimizer'], x['pass']): x['error'] for x in rows if x['where'] == 'hbm'}
    return {'host_held_out': j['subsets']['host held-out']['geomean_abs'], 'hbm': hbm}


@functools.lru_cache(maxsize=None)
def megatron(r, models):
    j = r.json('perfcast_megatron_ci_check', '--models', models, '--gpus', 'h100')
    s = j['subsets']
    return {'h100': s['dgx_h100'], 'det': s.get('deterministic mode'), 'nondet': s.get('not deterministic'),
            'rows': j['values'].get('rows', [])}


@functools.lru_cache(maxsize=None)
def megatron_memory(r):
    """The memory model on the last rank against the memory Megatron-LM's CI logged there."""
    j = r.json('perfcast_megatron_ci_check', '--memory', '1', '--models', 'all', '--gpus', 'both')
    s = j['subsets']
    return {'peak': s['peak all'], 'peak_h100': s['peak dgx_h100'], 'alloc': s['allocated all']}


@functools.lru_cache(maxsize=None)
def megatron_gb200(r):
    """The same CI test cases on DGX GB200 (data/public-measurements/megatron_ci_gb200.csv)."""
    j = r.json('perfcast_megatron_ci_check', '--data', 'data/public-measurements/megatron_ci_gb200.csv')
    rows = j['values'].get('rows', [])
    seven_b = [x['error'] for x in rows if '7b_' in x['model']]
    return {'gpt': j['subsets']['gb200_nvl72'], 'seven_b': seven_b}


@functools.lru_cache(maxsize=None)
def megatron_resumed(r):
    """The resumed runs of the CI's checkpoint-resume tests (data/public-measurements/megatron_ci_resumed.csv)."""
    j = r.json('perfcast_megatron_ci_check', '--data', 'data/public-measurements/megatron_ci_resumed.csv', '--gpus', 'h100')
    return j['subsets']['dgx_h100']


@functools.lru_cache(maxsize=None)
def param_dlrm(r):
    j = r.json('perfcast_param_dlrm_check')
    v = j['values']
    return {'eager': j['subsets']['pytorch_eager_held_out_ranks_4_7']['bias'],
            'torchrec': j['subsets']['torchrec_held_out_ranks_4_7']['bias'],
            'eager_s': v['predicted_s']['pytorch_eager'], 'measured_min_s': min(v['measured_s']),
            'measured_max_s': max(v['measured_s'])}


@functools.lru_cache(maxsize=None)
def h100_steps(r):
    """Published H100 pre-training step times (data/public-measurements/h100_training_step_times.csv)
    against predictions with the shipped defaults (the megatron_core host cost is fitted on these
    rows: its fit record gives the leave-one-source-out error): one dict per row."""
    out = r.tmp / 'h100_steps.csv'
    argv = [r.tool('perfcast_h100_recipes_check'), '--csv', str(out)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f'{" ".join(argv)}: exit {done.returncode}\n{done.stderr[-2000:]}')
    with open(out, newline='') as f:
        return tuple(csv.DictReader(f))


@functools.lru_cache(maxsize=None)
def hopper_kernels(r):
    """The Hopper kernel fit of docs/calibration.md: leave-one-source-out error per family."""
    S, HK = 'configs/systems', 'data/public-measurements/hopper-kernels'
    H200 = 'data/gpu-measurements/h200-2026-11-27'
    fit_dir = r.tmp / 'kernel-fit'
    fit_dir.mkdir(exist_ok=True)
    systems = [a for n in ('h100_sxm', 'h200', 'h800', 'pcie_8gpu', 'h100_nvl', 'gh200') for a in ('--system', f'{S}/{n}.json')]
    tables = [a for n in ('gemm', 'attention', 'memory_bound') for a in ('--measurements', f'{HK}/{n}.csv')]
    tables += [a for n in ('gemm.jsonl', 'memcpy_elementwise.jsonl', 'torch_attention.csv', 'torch_gemm.csv') for a in ('--measurements', f'{H200}/{n}')]
    j = r.json('perfcast', 'kernels', *systems, *tables, '--fit', f'{S}/h100_sxm.json', '--fit', f'{S}/h200.json',
               '--fit-dir', str(fit_dir))
    return {f['family']: f['held_out'] for f in j['summary']['by_family']}


def geomean_abs(errors):
    return math.exp(sum(math.log(max(abs(e), 1e-12)) for e in errors) / len(errors)) if errors else float('nan')


def h100_step_table(r):
    """docs/transformers.md: every published H100 step time, predicted, measured, error."""
    lines = ['| row | model | GPUs | precision | tp / pp / cp / vp | predicted | measured | error | fits |',
             '|---|---|---:|---|---|---:|---:|---:|---|']
    for x in h100_steps(r):
        vp = x['vp'] or '-'
        lines.append(f'| {x["row_id"]} | {x["model"]} | {int(x["gpus"]):,} | {x["precision"]} | '
                     f'{x["tp"]} / {x["pp"]} / {x["cp"]} / {vp} | {float(x["predicted_s"]):.3f} s | '
                     f'{float(x["measured_s"]):.3f} s | {spct(float(x["error"]))} | {x["fits"]} |')
    groups = {}
    for x in h100_steps(r):
        groups.setdefault(f'{x["source_id"]}, {x["precision"]}', []).append(float(x['error']))
    lines.append('')
    lines.append('| rows | n | geomean abs error | bias |')
    lines.append('|---|---:|---:|---:|')
    for g, e in sorted(groups.items()):
        lines.append(f'| {g} | {len(e)} | {pct(geomean_abs(e))} | {spct(sum(e) / len(e))} |')
    return '\n'.join(lines)


# ---- the rows -------------------------------------------------------------------------------

def rows(r):
    """(prediction, checked against, error) of every row, README order."""
    c1, c2, vt, rp, em, pd = comms_one_node(r), comms_two_nodes(r), vtrain(r), replay(r), embedding(r), param_dlrm(r)
    ib, neb, b2 = comms_infiniband(r), comms_nebius_shipped(r), comms_b200(r)
    mg, moe, mem, gb = megatron(r, 'gpt'), megatron(r, 'moe'), megatron_memory(r), megatron_gb200(r)
    moe_pp = {}
    for row in moe['rows']:
        moe_pp.setdefault(row['pp'], []).append(row['error'])
    pp1 = sorted(abs(e) for e in moe_pp.get('1', []))
    pp1_way = ('too fast' if all(e < 0 for e in moe_pp.get('1', [])) else
               'too slow' if all(e > 0 for e in moe_pp.get('1', [])) else 'off')
    hk = hopper_kernels(r)
    steps = {}
    for x in h100_steps(r):
        steps.setdefault(x['precision'], []).append(float(x['error']))
    n_steps = sum(len(e) for e in steps.values())
    within = sum(1 for e in steps.values() for x in e if abs(x) <= 0.10)
    with open(ROOT / 'configs/runtimes/megatron_core.json') as f:
        mc_fit = json.load(f)['fit']  # its leave-one-source-out error: bench/h100_recipes_check.cpp --leave-one-source-out
    return [
        ('all-reduce on one 8-GPU node, calibrated on the other sources',
         'nccl-tests tables of Azure ND H100 v5 / ND H200 v5, AWS p5, Azure ND A100 v4, vTrain A100',
         f'{span(c1["hopper"])} on Hopper, {span(c1["a100"])} on A100 (sizes >= 1 MiB, each source left out in turn; '
         f'the two A100 sources differ by {pct(max(c1["a100_copy"]))})'),
        ('all-reduce on two nodes (EFA): shipped `aws_p5` / `aws_p4de` calibrations; spec-derived elsewhere',
         'nccl-tests tables of 2x AWS p5.48xlarge (two runs) and 2x p4de.24xlarge',
         f'calibrated: {pct(c2["p5_held_out"])} / {pct(c2["p4de_held_out"])} on held-out sizes, '
         f'{span(c2["p5_loso"], 0)} on the p5 run left out where a fit of the other applies (the two runs differ by '
         f'{span(c2["p5_copy"], 0)}); '
         f'**spec-derived: {span(c2["spec"], 0)}**'),
        ('all-reduce across 2 to 128 H100 nodes on InfiniBand, each table left out in turn',
         f'nccl-tests tables of NCCL issues 309 / 322, CoreWeave\'s SHARP example and dstack\'s Nebius example ({ib["tables"]} tables at '
         f'{", ".join(str(n) for n in sorted(ib["spec"]))} nodes)',
         'calibrated on the other tables: ' + ', '.join(f'{span(v)} at {n} nodes' for n, v in sorted(ib['calibrated'].items())) +
         '; spec-derived: ' + ', '.join(f'{span(v)} at {n}' for n, v in sorted(ib['spec'].items())) +
         f'; the shipped calibration on the Nebius table, which it was not fitted on: **{pct(neb["geomean"])}** '
         f'(max {pct(neb["max"], 0)}) (sizes >= 1 MiB; [by node count](docs/collectives-and-runtimes.md'
         '#across-node-counts-leave-one-source-out-on-every-multi-node-source-model-nccl-alpha-beta-v4))'),
        ('all-reduce on two HGX B200 nodes (`hgx_b200`: 8 x 400 Gb/s NICs a node; its shipped calibration is fitted on both tables), each table left out in turn',
         'nccl-tests tables of dstack\'s Lambda (NCCL 2.26.2) and GCP A4 (RoCE) examples',
         f'calibrated on the other table: {span(b2["calibrated"])}; spec-derived: {span(b2["spec"])} '
         '(sizes >= 1 MiB)'),
        ('GPT training iteration, 2/4/8 A100 (Megatron-DeepSpeed)', f'vTrain, {vt["rows"]:,} measured runs',
         f'{pct(vt["held_out"], 2)} geomean on the held-out 4+8-GPU rows with the shipped runtime profile (host costs '
         f'fitted on 2-GPU rows); {pct(vt["nothing_fitted"])} with nothing fitted'),
        ('DLRM trace replay, measured kernel times', 'PARAM (8x V100), HTA (A100) Kineto traces',
         f'{pct(rp["param_measured"], 2)} / {spct(rp["hta_measured"])} step time'),
        ('DLRM trace replay, predicted kernels', 'the same traces',
         f'{pct(rp["param_predicted"], 2)} geomean over ranks (host-bound; max {pct(rp["param_predicted_max"])}) / '
         f'{spct(rp["hta_predicted"])} on held-out steps, each within {pct(max(abs(e) for e in rp["hta_held_steps"]))} '
         '(GPU-bound, one traced rank whose collectives keep their measured peer waits)'),
        ('embedding kernels in HBM, one H100', 'FBGEMM TBE timings (one of the four sources of the shipped fit; held out: docs/embedding.md)',
         f'backward {spct(em["hbm"][("sgd", "backward")])} / {spct(em["hbm"][("adam", "backward")])} (SGD / Adam), '
         f'forward {spct(em["hbm"][("sgd", "forward")], 0)}'),
        ('kernels calibrated from those traces', 'held-out ranks / steps',
         f'GEMM {pct(rp["param_families"]["gemm"], 0)} / {pct(rp["hta_families"]["gemm"], 0)}, '
         f'memcpy {pct(rp["param_families"]["memcpy"], 0)} / {pct(rp["hta_families"]["memcpy"], 0)}, '
         f'elementwise {pct(rp["hta_families"]["elementwise"], 0)} (HTA)'),
        ('embedding tables in host memory (`fused_uvm`), one H100',
         'FBGEMM timings of a second public source (the first fits two link efficiencies)',
         f'{pct(em["host_held_out"])} geomean held out'),
        ('GPT step on one DGX H100, shipped defaults',
         f'Megatron-LM CI step times, the {mg["h100"]["count"]} GPT rows perfcast can express',
         f'**{pct(mg["h100"]["geomean_abs"])}** geomean held out (mean {pct(mg["h100"]["mape"])}; deterministic-mode '
         f'rows {pct(mg["det"]["geomean_abs"])}, the others {pct(mg["nondet"]["geomean_abs"])}; against the resumed runs of '
         f'the {megatron_resumed(r)["count"]} jobs the CI also ran resumed, {pct(megatron_resumed(r)["geomean_abs"])}: '
         'their first runs are slow on DGX H100), with the '
         '`megatron_core_ci` runtimes of each mode fitted on the DGX A100 rows and their host costs scaled to the '
         'DGX H100 CPU ([details](docs/transformers.md#megatron-lm-ci-step-times-on-dgx-h100-and-dgx-a100))'),
        ('GPT step on DGX GB200 (two trays of 4 GPUs, one NVLink domain), shipped defaults',
         f'Megatron-LM CI step times on DGX GB200, the {gb["gpt"]["count"]} GPT rows perfcast can express '
         '(`data/public-measurements/megatron_ci_gb200.csv`)',
         f'**{pct(gb["gpt"]["geomean_abs"])}** geomean held out (bias {spct(gb["gpt"]["bias"])}; host costs fitted on '
         'DGX A100, the Grace CPU\'s host speed measured on the MoE rows); the two GPU-bound 7B rows '
         f'{span(sorted(abs(e) for e in gb["seven_b"]), 0)} too fast (the same runs on DGX H100: '
         f'{span(sorted(abs(x["error"]) for x in mg["rows"] if "7b_" in x["model"]), 0)}) '
         '([details](docs/transformers.md#dgx-gb200-the-same-test-cases-held-out))'),
        ('GPT and MoE memory per GPU (weights, gradients, optimizer states, activations), DGX H100 and DGX A100',
         f'the memory {mem["peak"]["count"]} of Megatron-LM\'s CI runs (dense and MoE, DGX H100 and DGX A100) logged on '
         'their last rank (`data/public-measurements/megatron_ci_memory.csv`)',
         f'peak allocation **{pct(mem["peak"]["geomean_abs"])}** geomean (bias {spct(mem["peak"]["bias"])}; DGX H100 '
         f'{pct(mem["peak_h100"]["geomean_abs"])}); the allocation kept between steps {pct(mem["alloc"]["geomean_abs"])} '
         f'(bias {spct(mem["alloc"]["bias"], 0)}: these small models keep 20-240 MiB of buffers perfcast counts in its '
         'reserve, Transformer Engine\'s cuBLAS workspace among them) ([details](docs/transformers.md#memory-against-megatron-lms-ci))'),
        ('DLRM training iteration, 8x V100 (TorchRec, host-bound)',
         "PARAM's traced test job rebuilt as a perfcast workload (`configs/workloads/param_dlrm_v100.json`)",
         f'**{spct(pd["eager"], 0)}** with the default host costs ({pd["eager_s"] * 1e3:.2f} ms against '
         f'{pd["measured_min_s"] * 1e3:.1f}-{pd["measured_max_s"] * 1e3:.1f} ms per rank); {spct(pd["torchrec"])} on '
         'the held-out ranks with the opt-in `torchrec` runtime profile, fitted on the other ranks of the same step '
         '([details](docs/collectives-and-runtimes.md#torchrec-a-dlrm-step-against-its-trace))'),
        ('mixture-of-experts GPT step on one DGX H100',
         f'Megatron-LM CI step times, the {moe["h100"]["count"]} MoE rows perfcast can express',
         f'{pct(moe["h100"]["geomean_abs"])} geomean held out (mean {pct(moe["h100"]["mape"])}; MoE host cost fitted '
         f'on the DGX A100 rows)' + (f'; pp 1 rows {span(pp1, 0)} {pp1_way}' if pp1 else '') +
         ' ([details](docs/transformers.md#mixture-of-experts-rows))'),
        ('Hopper kernels: shipped H100 SXM / H200 calibrations fitted on public measurements and on perfcast\'s own '
         'H200 measurements',
         'the public Hopper kernel tables (`data/public-measurements/hopper-kernels/`) and 8,050 H200 kernels timed by '
         'perfcast (`data/gpu-measurements/h200-2026-11-27/`), each source left out in turn',
         f'GEMM **{pct(hk["gemm"]["per_source_geomean_abs_error"])}**, attention '
         f'**{pct(hk["attention"]["per_source_geomean_abs_error"])}**, '
         f'memory-bound **{pct(hk["memory_bound"]["per_source_geomean_abs_error"])}** (geometric mean over the held-out '
         'sources; a source timed by a harness scored after its own per-call cost; the kernels\' time alone: GEMM '
         f'{pct(hk["gemm"]["kernels_alone_per_source_geomean_abs_error"])}, attention '
         f'{pct(hk["attention"]["kernels_alone_per_source_geomean_abs_error"])}, memory-bound '
         f'{pct(hk["memory_bound"]["kernels_alone_per_source_geomean_abs_error"])}) '
         '([details](docs/calibration.md#hopper-kernels-from-public-measurements-kernel-model-2))'),
        ('LLM pre-training step on 8-6,144 H100; the `megatron_core` runtime\'s host cost a module call fitted on these '
         'rows\' sources',
         f'published step times: NeMo 24.07 FP8 table ({len(steps.get("fp8", []))} rows), Megatron-Core r0.8.0 weak '
         f'scaling and the Megatron MoE model zoo\'s Qwen3-235B, bf16 ({len(steps.get("bf16", []))} rows)',
         f'each source left out in turn **{pct(mc_fit["heldout_geomean_abs_error"])}** geomean; with the shipped fit fp8 '
         f'{pct(geomean_abs(steps["fp8"]))} (bias {spct(sum(steps["fp8"]) / len(steps["fp8"]))}), bf16 '
         f'{pct(geomean_abs(steps["bf16"]))} (bias {spct(sum(steps["bf16"]) / len(steps["bf16"]))}); '
         f'{within} of {n_steps} rows within 10%: goal not met '
         '([details](docs/transformers.md#published-h100-step-times-of-large-models))'),
    ]


def readme_table(r):
    lines = ['| prediction | checked against | error |', '|---|---|---|']
    lines += [f'| {a} | {b} | {c} |' for a, b, c in rows(r)]
    return '\n'.join(lines)


def accuracy_table(r):
    """docs/accuracy.md: the same rows, links relative to docs/."""
    lines = ['| prediction | checked against | error |', '|---|---|---|']
    for a, b, c in rows(r):
        c = c.replace('](docs/', '](')
        lines.append(f'| {a} | {b} | {c} |')
    return '\n'.join(lines)


TABLES = {'readme-table': readme_table, 'accuracy-table': accuracy_table, 'h100-step-times': h100_step_table}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('build', help='build folder with cli/perfcast and the bench tools')
    parser.add_argument('--check', action='store_true', help='report stale tables, write nothing')
    args = parser.parse_args()
    r = Runner(args.build)

    def compute(key):
        if key not in TABLES:
            raise SystemExit(f'unknown generated table `{key}` (known: {", ".join(TABLES)})')
        return TABLES[key](r)

    diffs = []
    for page in pages(ROOT):
        diffs += update_blocks(page, SCRIPT, compute, args.check)
    if args.check and diffs:
        print(''.join(diffs))
        print(f'{len(diffs)} accuracy table(s) differ from what the code computes now: run `make accuracy` and commit')
        return 1
    print('accuracy tables: ' + ('every table matches the code' if args.check else f'{len(diffs)} rewritten'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
