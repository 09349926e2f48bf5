"""DistributedDataParallel training on the tributary backend compared with gloo's: the same
model, data and seeds give the same losses (identical with 2 ranks, whose sums are exact;
within 1e-5 relative otherwise), with DDP's built-in all-reduce and with a communication hook
that chains on the Work's future."""
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import launch

STEPS = 8


def train(rank, world, out_dir, hook):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 4))
    ddp = DDP(model, bucket_cap_mb=0.01)  # several buckets, so several all-reduces per step
    if hook:
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(16, 32, generator=gen)
        y = torch.randn(16, 4, generator=gen)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        # the mean loss over ranks, on gloo's group so both runs average the same way
        t = loss.detach().clone()
        dist.all_reduce(t, group=out_dir[1])
        losses.append(t.item())
    params = [p.detach().flatten() for p in model.parameters()]
    if rank == 0:
        with open(os.path.join(out_dir[0], "losses.json"), "w") as f:
            json.dump({"losses": losses, "params": torch.cat(params).tolist()}, f)


def run_one(backend, world, hook):
    with tempfile.TemporaryDirectory() as tmp:
        def fn(rank, world_):
            gloo = dist.new_group(backend="gloo")
            train(rank, world_, (tmp, gloo), hook)
        launch.run(fn, world, backend=backend)
        with open(os.path.join(tmp, "losses.json")) as f:
            return json.load(f)


def main():
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    ref = run_one("gloo", world, hook=False)
    for hook in (False, True):
        got = run_one("tributary", world, hook)
        for name in ("losses", "params"):
            a, b = torch.tensor(got[name]), torch.tensor(ref[name])
            if world == 2:
                assert torch.equal(a, b), "%s differ from gloo's (hook=%s): %s vs %s" % (name, hook, a[:4], b[:4])
            else:
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
        print("DDP on tributary (%d ranks, comm hook %s): %d losses %s gloo's, last %.6f" % (
            world, hook, STEPS, "identical to" if world == 2 else "within 1e-5 of", got["losses"][-1]))


if __name__ == "__main__":
    main()
