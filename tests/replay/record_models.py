#!/usr/bin/python3
"""Records the PyTorch traces that orrery replay's tests read (tests/data/pytorch/recorded/).

Run with Debian's interpreter, so that Debian's python3-torch (1.13, CPU) is the torch imported:
    /usr/bin/python3 tests/replay/record_models.py [--out DIR] [MODEL ...]
    /usr/bin/python3 tests/replay/record_models.py --measure MODEL [--iterations N]
    (both take --batch-scale K: K times each model's batch; tests/data holds K = 1)

Each model is an MLP, a small CNN or a transformer encoder block, in training (SGD with momentum)
or inference (eval mode, torch.inference_mode). For each, after 5 warm-up iterations, the profiler
records 6 iterations on the CPU, each inside a record_function("ProfilerStep#k") so that the
iterations are marked as torch.profiler's schedule marks them, and the execution trace observer
records the third of them. Written, gzip-compressed:
    <model>/<model>_et.json.gz      the execution trace (ExecutionGraphObserver, schema 1.0.1)
    <model>/<model>_trace.json.gz   the profiler's Chrome trace (this build has no Kineto: the
                                    JSON array form, pid "CPU functions")
The 'ddp' model is the MLP trained by DistributedDataParallel in two processes over Gloo (buckets
of 0.5 MB, so several all-reduces per iteration): ddp/rank<r>_et.json.gz and rank<r>_trace.json.gz.

--measure runs a model without any profiler or observer and prints, as JSON, the median and every
sample of its iteration time in microseconds, wall and process CPU (rank 0's for ddp): the
"original" that bench/replay_study.sh compares the replay with. Every run uses one intra-op thread
(torch.set_num_threads(1)), seed 0 and subnormal floats flushed to zero (torch.set_flush_denormal),
as orrery replay does by default: trained on one fixed batch, these models' gradients decay into
the subnormal range, where x86 arithmetic is 10-100x slower (the MLP's weight-gradient GEMM took
556 us against 143 us on normal values), and a replay, whose data is random, cannot follow that.
"""
import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

MODELS = ["mlp_train", "mlp_infer", "cnn_train", "cnn_infer", "transformer_train",
          "transformer_infer", "ddp"]
WARMUP = 5
PROFILED = 6
TRACED = 2  # the profiled iteration the execution trace observer records


def observer_class():
    # Debian's 1.13 calls it ExecutionGraphObserver; later releases ExecutionTraceObserver.
    profiler = torch.profiler
    return getattr(profiler, "ExecutionTraceObserver", None) or profiler.ExecutionGraphObserver


def build(name, seed=0, scale=1):
    """The model, its step function (one iteration) and whether it trains; `scale` multiplies
    the batch."""
    torch.manual_seed(seed)
    kind, mode = name.rsplit("_", 1) if name != "ddp" else ("mlp", "train")
    if kind == "mlp":
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10))
        x = torch.randn(32 * scale, 256)
        target = torch.randint(0, 10, (32 * scale,))
        loss_of = lambda out: F.cross_entropy(out, target)
    elif kind == "cnn":
        model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64),
                              nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 8 * 8, 10))
        x = torch.randn(16 * scale, 3, 32, 32)
        target = torch.randint(0, 10, (16 * scale,))
        loss_of = lambda out: F.cross_entropy(out, target)
    elif kind == "transformer":
        model = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512,
                                           dropout=0.1, batch_first=True)
        x = torch.randn(2 * scale, 64, 128)
        target = torch.randn(2 * scale, 64, 128)
        loss_of = lambda out: F.mse_loss(out, target)
    else:
        raise SystemExit(f"unknown model {name}")
    return model, x, loss_of, mode == "train"


def make_step(model, x, loss_of, train):
    if train:
        model.train()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step():
            optimizer.zero_grad()
            loss_of(model(x)).backward()
            optimizer.step()
    else:
        model.eval()

        def step():
            with torch.inference_mode():
                model(x)
    return step


def write_gz(source, target):
    with open(source, "rb") as raw, gzip.open(target, "wb", compresslevel=9) as packed:
        shutil.copyfileobj(raw, packed)


def record(step, et_path, trace_path):
    """Warm-up, then PROFILED profiled iterations, the TRACED-th also in the execution trace."""
    for _ in range(WARMUP):
        step()
    with tempfile.TemporaryDirectory() as scratch:
        et_json = os.path.join(scratch, "et.json")
        trace_json = os.path.join(scratch, "trace.json")
        observer = observer_class()()
        observer.register_callback(et_json)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for k in range(PROFILED):
                if k == TRACED:
                    observer.start()
                with torch.profiler.record_function(f"ProfilerStep#{k}"):
                    step()
                if k == TRACED:
                    observer.stop()
        observer.unregister_callback()
        prof.export_chrome_trace(trace_json)
        write_gz(et_json, et_path)
        write_gz(trace_json, trace_path)


def measure(step, iterations):
    """Wall and process CPU time of each of `iterations` iterations after the warm-up, in us."""
    for _ in range(WARMUP):
        step()
    samples = []
    cpu = []
    for _ in range(iterations):
        start = time.perf_counter()
        cpu_start = time.process_time()
        step()
        cpu.append((time.process_time() - cpu_start) * 1e6)
        samples.append((time.perf_counter() - start) * 1e6)
    return samples, cpu


def ddp_worker(rank, port, out_dir, iterations, results, scale):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    model, x, loss_of, _ = build("ddp", seed=0, scale=scale)
    torch.manual_seed(rank + 1)  # each rank its own batch
    x = torch.randn_like(x)
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.5)
    step = make_step(ddp, x, loss_of, True)
    if out_dir is not None:
        record(step, os.path.join(out_dir, f"rank{rank}_et.json.gz"),
               os.path.join(out_dir, f"rank{rank}_trace.json.gz"))
    else:
        measured = measure(step, iterations)
        if rank == 0:
            results.put(measured)
    dist.barrier()
    dist.destroy_process_group()


def run_ddp(out_dir, iterations=0, scale=1):
    import torch.multiprocessing as mp
    context = mp.get_context("fork")
    results = context.Queue()
    port = 29500 + os.getpid() % 1000
    workers = [context.Process(target=ddp_worker, args=(rank, port, out_dir, iterations, results,
                                                              scale))
               for rank in range(2)]
    for worker in workers:
        worker.start()
    samples = results.get() if out_dir is None else None
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise SystemExit(f"ddp rank exited with {worker.exitcode}")
    return samples


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=MODELS)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "data",
                                                      "pytorch", "recorded"))
    parser.add_argument("--measure", metavar="MODEL")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--batch-scale", type=int, default=1, metavar="K",
                        help="K times each model's batch (the traces in tests/data are K = 1)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    if args.measure:
        if args.measure == "ddp":
            samples, cpu = run_ddp(None, args.iterations, args.batch_scale)
        else:
            samples, cpu = measure(make_step(*build(args.measure, scale=args.batch_scale)),
                                   args.iterations)
        print(json.dumps({"model": args.measure, "median_us": statistics.median(samples),
                          "cpu_median_us": statistics.median(cpu), "samples_us": samples,
                          "cpu_samples_us": cpu, "torch": torch.__version__, "threads": 1}))
        return
    for name in args.models:
        out_dir = os.path.join(args.out, name)
        os.makedirs(out_dir, exist_ok=True)
        if name == "ddp":
            run_ddp(out_dir, scale=args.batch_scale)
        else:
            record(make_step(*build(name, scale=args.batch_scale)), os.path.join(out_dir, f"{name}_et.json.gz"),
                   os.path.join(out_dir, f"{name}_trace.json.gz"))
        print(f"recorded {name} in {out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
