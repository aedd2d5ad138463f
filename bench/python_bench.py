#!/usr/bin/env python3
"""Python module benchmarks: the cost of a run from Python on a small scenario, and eight
simulations sharing one loaded 1,024-rank trace set on two threads against eight separate runs.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py [--work DIR] [--skip-large]

Prints medians; the large case also prints peak memory (ru_maxrss) of the shared run and of one
separate process per simulation, and checks every shared result equals its sequential twin.
"""
import argparse
import concurrent.futures
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orrery

ROOT = Path(__file__).resolve().parents[1]
RING8 = {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50], "latency": [500]}
SYSTEM = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
          "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"],
          "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
          "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
          "local-mem-bw": 1600}


def small_overhead(repeats):
    scenario = orrery.Scenario(orrery.gen.microbench("all-reduce", "1MiB", ranks=8), SYSTEM, RING8)
    orrery.run(scenario)
    python = []
    for _ in range(repeats):
        started = time.perf_counter()
        orrery.run(scenario)
        python.append(time.perf_counter() - started)
    # The whole call, simulation included: the overhead is at most this.
    print(f"small scenario (8-rank 1 MiB all-reduce, {repeats} runs): orrery.run median "
          f"{statistics.median(python) * 1e6:.0f} us, p90 "
          f"{sorted(python)[int(0.9 * len(python))] * 1e6:.0f} us")
    replaced = []
    for index in range(repeats):
        started = time.perf_counter()
        scenario.replace(bandwidth=[50 + index % 7])
        replaced.append(time.perf_counter() - started)
    print(f"scenario.replace(bandwidth=...) median {statistics.median(replaced) * 1e6:.0f} us")


LARGE_SYSTEM = dict(SYSTEM, **{"all-reduce-implementation": ["ring", "ring"],
                               "all-gather-implementation": ["ring", "ring"],
                               "reduce-scatter-implementation": ["ring", "ring"],
                               "all-to-all-implementation": ["direct", "direct"],
                               "roofline-enabled": 1, "peak-perf": 312})
BANDWIDTHS = [12.5, 25, 50, 100, 150, 200, 300, 400]


def large_network(bandwidth):
    return {"topology": ["Switch", "Switch"], "npus_count": [8, 128],
            "bandwidth": [300, bandwidth], "latency": [500, 2000]}


def one_separate_run(prefix, bandwidth):
    """A child process: load the traces and run one simulation; prints finish and peak."""
    scenario = orrery.Scenario(prefix, LARGE_SYSTEM, large_network(bandwidth),
                               comm_groups=prefix + ".json")
    result = orrery.run(scenario)
    print(json.dumps({"finish_ns": result.finish_ns,
                      "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def large_shared(work):
    prefix = str(Path(work) / "gpt" / "w")
    model = Path(work) / "gpt_small.json"
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_text('{"base": "gpt3-6.7b", "layers": 4}')
    if not Path(prefix + ".1023.et").exists():
        orrery.gen.llm(model=str(model), tp=8, dp=128, global_batch=128).write(prefix)
    started = time.perf_counter()
    base = orrery.Scenario(prefix, LARGE_SYSTEM, large_network(25), comm_groups=prefix + ".json")
    loaded = time.perf_counter() - started
    scenarios = [base.replace(bandwidth=[300, b]) for b in BANDWIDTHS]
    started = time.perf_counter()
    sequential = [orrery.run(s) for s in scenarios]
    one_thread = time.perf_counter() - started
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        shared = list(pool.map(orrery.run, scenarios))
    two_threads = time.perf_counter() - started
    identical = all(a.to_json() == b.to_json() for a, b in zip(sequential, shared))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"1,024 ranks (gpt3-6.7b, 4 layers, tp 8 x dp 128): traces loaded once in {loaded:.2f} s; "
          f"8 simulations {one_thread:.1f} s on one thread, {two_threads:.1f} s on two "
          f"({one_thread / two_threads:.2f}x); results identical to sequential: {identical}; "
          f"peak {peak:.0f} MiB in one process")
    separate = []
    started = time.perf_counter()
    for bandwidth in BANDWIDTHS:
        out = subprocess.run([sys.executable, __file__, "--child", prefix, str(bandwidth)],
                             check=True, capture_output=True, text=True).stdout
        separate.append(json.loads(out))
    elapsed = time.perf_counter() - started
    same = [s["finish_ns"] for s in separate] == [r.finish_ns for r in shared]
    print(f"8 separate processes (each loads the traces): {elapsed:.1f} s, peak "
          f"{max(s['rss_mib'] for s in separate):.0f} MiB each, "
          f"{sum(s['rss_mib'] for s in separate):.0f} MiB if run at once; same finishes: {same}")
    for bandwidth, result in zip(BANDWIDTHS, shared):
        print(f"  scale-out {bandwidth:>5} GB/s: {result.finish_ns / 1e6:9.3f} ms")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        one_separate_run(sys.argv[2], float(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/orrery-python-bench")
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--skip-large", action="store_true")
    args = parser.parse_args()
    small_overhead(args.repeats)
    if not args.skip_large:
        large_shared(args.work)


if __name__ == "__main__":
    main()
