"""Sharded data-parallel training on CPU over the tributary backend, compared with the same
training in one process (parameters within 1e-5 relative).

`sharded`: FSDP's communication, written out: each rank keeps a shard of the flat parameters,
all_gather_into_tensor rebuilds them for the step, reduce_scatter_tensor averages the gradients
into each rank's shard (Debian's torch 1.13 gloo backend cannot run either). `fsdp`:
torch.distributed.fsdp itself, where this torch can run it on CPU; otherwise the test reports
SKIPPED with the reason (exit code 77)."""
import importlib
import sys

import torch
import torch.distributed as dist

import launch

STEPS, LR, BATCH = 6, 0.1, 8


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 40), torch.nn.Tanh(), torch.nn.Linear(40, 40), torch.nn.Tanh(),
                               torch.nn.Linear(40, 3))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(BATCH, 12, generator=g), torch.randn(BATCH, 3, generator=g)


def reference(world):
    """One process, every rank's batch: the mean of the ranks' losses."""
    model = make_model()
    for step in range(STEPS):
        loss = sum(torch.nn.functional.mse_loss(model(x), y) for x, y in (batch(r, step) for r in range(world)))
        model.zero_grad()
        (loss / world).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= LR * p.grad
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def sharded(rank, world):
    model = make_model()
    params = list(model.parameters())
    flat = torch.cat([p.detach().flatten() for p in params])
    n = flat.numel()
    per = (n + world - 1) // world
    flat = torch.cat([flat, flat.new_zeros(per * world - n)])
    shard = flat[rank * per:(rank + 1) * per].clone()  # this rank's part only
    full = torch.empty(per * world)
    for step in range(STEPS):
        dist.all_gather_into_tensor(full, shard)
        with torch.no_grad():
            offset = 0
            for p in params:
                p.copy_(full[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
        x, y = batch(rank, step)
        model.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        grad = torch.cat([p.grad.flatten() for p in params] + [flat.new_zeros(per * world - n)])
        grad_shard = torch.empty(per)
        dist.reduce_scatter_tensor(grad_shard, grad, op=dist.ReduceOp.AVG)
        shard -= LR * grad_shard
    dist.all_gather_into_tensor(full, shard)
    torch.testing.assert_close(full[:n], reference(world), rtol=1e-5, atol=1e-6)


def fsdp_unusable():
    if not torch.__version__.split(".")[0].isdigit() or int(torch.__version__.split(".")[0]) < 2:
        return "torch %s's FSDP needs CUDA (and does not import under Python 3.11)" % torch.__version__
    try:
        importlib.import_module("torch.distributed.fsdp")
    except Exception as e:  # noqa: B902
        return "torch.distributed.fsdp does not import: %s" % e
    return None


def fsdp(rank, world):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    model = FSDP(make_model(), device_id=torch.device("cpu"))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        x, y = batch(rank, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    with FSDP.summon_full_params(model):
        got = torch.cat([p.detach().flatten() for p in model.parameters()])
    torch.testing.assert_close(got, reference(world), rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
    mode, world = sys.argv[1], int(sys.argv[2])
    if mode == "fsdp":
        why = fsdp_unusable()
        if why:
            print("SKIPPED: " + why)
            sys.exit(77)
    launch.run(sharded if mode == "sharded" else fsdp, world)
    print("test_torch_fsdp %s: %d ranks trained, parameters match one process's" % (mode, world))
