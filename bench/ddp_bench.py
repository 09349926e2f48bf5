"""DDP step time of a ~10M-parameter MLP, tributary vs gloo, in the same run.

    PYTHONPATH=build/python /usr/bin/python3 bench/ddp_bench.py [--ranks 2,4] [--batches 1,256]

Batch 1 is communication-bound (40 MB of gradients per step, little compute); a large batch is
compute-bound. Each rank runs one thread; the backends alternate, round by round, so a slow
moment of a shared machine hits both. Prints the median step time of each and the ratio."""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import launch  # noqa: E402  (the tests' launcher: fork()ed ranks, one group)


def make_model():
    torch.manual_seed(0)
    dims = [1024, 2048, 2048, 1024, 1024]
    layers = []
    for a, b in zip(dims, dims[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def steps(rank, world, batch, warmup, iters, out):
    model = DDP(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x, y = torch.randn(batch, 1024), torch.randn(batch, 1024)
    times = []
    for i in range(warmup + iters):
        dist.barrier()
        t0 = time.perf_counter()
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()  # DDP's all-reduces run here, overlapped with the backward pass
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    t = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"median_s": t.item()}, f)


def measure(backend, world, batch, warmup, iters):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        launch.run(steps, world, backend=backend, timeout_s=300, deadline_s=900, args=(batch, warmup, iters, out))
        with open(out) as f:
            return json.load(f)["median_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--batches", default="1,256")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    params = sum(p.numel() for p in make_model().parameters())
    print("DDP MLP %.1fM parameters (%.0f MB of float32 gradients), torch %s, %d rounds of %d steps" % (
        params / 1e6, params * 4 / 1e6, torch.__version__, a.rounds, a.iters))
    print("%5s %6s %14s %14s %8s" % ("ranks", "batch", "tributary ms", "gloo ms", "gloo/trib"))
    for world in [int(r) for r in a.ranks.split(",")]:
        for batch in [int(b) for b in a.batches.split(",")]:
            res = {"tributary": [], "gloo": []}
            for _ in range(a.rounds):
                for backend in res:
                    res[backend].append(measure(backend, world, batch, a.warmup, a.iters))
            trib, gloo = min(res["tributary"]), min(res["gloo"])
            print("%5d %6d %14.2f %14.2f %8.2f" % (world, batch, trib * 1e3, gloo * 1e3, gloo / trib), flush=True)


if __name__ == "__main__":
    main()
