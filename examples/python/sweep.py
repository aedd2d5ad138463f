#!/usr/bin/env python3
"""A bandwidth-by-algorithm sweep of a generated GPT-3 trace set, run on a thread pool.

The trace set is generated once in memory; every point is a Scenario made from it with replace()
(no trace is generated or read again), and orrery.run releases the GIL, so the pool's threads
simulate at once. Prints a table and writes a PNG plot with matplotlib.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/sweep.py [--out sweep.png]
"""
import argparse
import concurrent.futures
import os
import time

import orrery


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="sweep.png", help="the plot (PNG)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--model", default="gpt3-6.7b")
    args = parser.parse_args()

    started = time.perf_counter()
    traces = orrery.gen.llm(model=args.model, tp=8, dp=4, global_batch=32, micro_batch=1)
    print(f"{traces.name}: {traces.ranks} ranks ({traces.distinct_traces} distinct traces), "
          f"generated in {time.perf_counter() - started:.2f} s")

    # Switch(8) for tensor parallelism inside a node, Switch(4) across nodes.
    network = {"topology": ["Switch", "Switch"], "npus_count": [8, 4],
               "bandwidth": [300, 25], "latency": [500, 2000]}
    system = {"scheduling-policy": "LIFO", "endpoint-delay": 10,
              "active-chunks-per-dimension": 1, "preferred-dataset-splits": 4,
              "all-reduce-implementation": ["ring", "ring"],
              "all-gather-implementation": ["ring", "ring"],
              "reduce-scatter-implementation": ["ring", "ring"],
              "all-to-all-implementation": ["direct", "direct"],
              "collective-optimization": "localBWAware", "local-mem-bw": 2000,
              "roofline-enabled": 1, "peak-perf": 312}
    base = orrery.Scenario(traces, system, network)

    algorithms = ["ring", "direct", "halvingDoubling"]
    scale_out = [12.5, 25, 50, 100, 200]  # GB/s per NPU across nodes
    points = [(algorithm, bandwidth) for algorithm in algorithms for bandwidth in scale_out]
    scenarios = [base.replace(bandwidth=[300, bandwidth],
                              system={"all-reduce-implementation": [algorithm, algorithm]})
                 for algorithm, bandwidth in points]

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.threads) as pool:
        results = list(pool.map(orrery.run, scenarios))
    elapsed = time.perf_counter() - started
    print(f"{len(points)} simulations on {args.threads} threads in {elapsed:.2f} s\n")

    times = {(a, b): r.finish_ns / 1e6 for (a, b), r in zip(points, results)}
    print(f"{'scale-out GB/s':>14}" + "".join(f"{a:>18}" for a in algorithms))
    for bandwidth in scale_out:
        print(f"{bandwidth:>14}" + "".join(f"{times[(a, bandwidth)]:>15.3f} ms" for a in algorithms))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(6, 4))
    for algorithm in algorithms:
        axes.plot(scale_out, [times[(algorithm, b)] for b in scale_out], marker="o",
                  label=algorithm)
    axes.set_xscale("log", base=2)
    axes.set_xlabel("scale-out bandwidth per NPU (GB/s)")
    axes.set_ylabel("iteration time (ms)")
    axes.set_title(f"{args.model}, tp 8 x dp 4: all-reduce algorithm by bandwidth")
    axes.legend()
    figure.tight_layout()
    figure.savefig(args.out, dpi=120)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
