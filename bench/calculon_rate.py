#!/usr/bin/env python3
"""Calculon's search rate beside `perfcast plan` (docs/benchmarks.md, parallelism search).

Calculon (https://github.com/calculon-ai/calculon, Apache-2.0; measured at commit caa4b11) is
an analytical LLM performance model whose `llm-optimal-execution` command rates every
execution of a space. This script runs that command's per-tuple search serially on one core,
for GPT-3 175B on 1,024 GPUs with batch 1,536 in float16 (the problem `perfcast_bench_plan`
searches), over a fixed shuffle of its (tp, pp, dp, interleaving, recompute, optimizer
sharding, TP communication type) tuples until the time limit passes, and prints executions
per CPU second.

    git clone https://github.com/calculon-ai/calculon /tmp/calculon   # needs python3-psutil
    taskset -c 0 python3 bench/calculon_rate.py /tmp/calculon [SYSTEM_FILE] [SECONDS]

SYSTEM_FILE is one of Calculon's systems/ (default h100_80g_nvl8.json); SECONDS default 60.
"""
import logging
import os
import random
import sys
import time


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1]
    system_file = sys.argv[2] if len(sys.argv) > 2 else "h100_80g_nvl8.json"
    limit = float(sys.argv[3]) if len(sys.argv) > 3 else 60.0
    sys.path.insert(0, root)
    import calculon
    from calculon.llm import Llm
    from calculon.llm.optimal_execution import OptimalExecution
    from calculon.system import System
    from calculon.util import pick

    # As Calculon's command line sets it up (bin/calculon: the root logger at INFO). Each
    # execution logs through a logger of its own, as the command runs it.
    logging.getLogger().setLevel(logging.INFO)
    app = Llm.Application(calculon.io.read_json_file(os.path.join(root, "models/gpt3-175B.json")))
    system = System(calculon.io.read_json_file(os.path.join(root, "systems", system_file)))
    procs, max_batch = 1024, 1536
    tuples = []
    for tp in Llm.get_all_tensor_parallelisms(procs, app.hidden, app.attn_heads):
        for pp in Llm.get_all_pipeline_parallelisms(procs, tp, app.num_blocks):
            dp = Llm.get_data_parallelism(procs, tp, pp)
            for interleaving in Llm.get_valid_pipeline_interleavings(app.num_blocks, pp):
                batch = OptimalExecution.get_batch_size(dp, max_batch)
                if batch is None:
                    continue
                for recompute in ["full", "attn_only", "none"]:
                    for sharding in pick(dp > 1, [True, False], [False]):
                        for comm in ["ar", "p2p_rs_ag", "rs_ag"]:
                            # The arguments of OptimalExecution.search, as its command passes them.
                            tuples.append((False, 1, False, procs, max_batch, "float16", app, system, tp, pp, dp,
                                           interleaving, batch, recompute, sharding, comm, [True], False, True, True))
    random.seed(1)
    random.shuffle(tuples)
    cpu0, wall0 = time.process_time(), time.time()
    executions = fitting = 0
    for t in tuples:
        _, count, good, _, _, _ = OptimalExecution.search(*t)
        executions += count
        fitting += good
        if time.time() - wall0 > limit:
            break
    cpu = time.process_time() - cpu0
    print(f"Calculon, {system_file}: {len(tuples)} search tuples; {executions} executions ({fitting} fit) "
          f"in {cpu:.1f} s of CPU: {executions / cpu:.0f} executions per second")
    return 0


if __name__ == "__main__":
    sys.exit(main())
