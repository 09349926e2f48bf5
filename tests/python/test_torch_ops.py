"""Every c10d operation of the tributary backend against locally computed expectations, over the
world size given (2, 3 and 4 in CTest): all shared dtypes, non-contiguous tensors, async Work
objects and futures, subgroups, and bad input raising clear Python exceptions."""
import sys

import torch
import torch.distributed as dist
from torch.testing import assert_close

import launch

REDUCE_TYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
                torch.float64]
MOVE_TYPES = REDUCE_TYPES + [torch.bool, torch.int16, torch.complex64]
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}


def value(rank, n, dtype, salt=0):
    """Rank r's data: small integers (exact in every dtype), different per rank and element."""
    base = (torch.arange(n, dtype=torch.int64) * 7 + salt) % 5 + rank + 1
    if dtype == torch.bool:
        return (base % 2).bool()
    return base.to(dtype)


def expected(op, world, n, dtype, salt=0):
    vals = [value(r, n, torch.int64, salt) for r in range(world)]
    if op == "sum":
        out = sum(vals)
    elif op == "product":
        out = vals[0]
        for v in vals[1:]:
            out = out * v
    elif op == "min":
        out = torch.stack(vals).min(0).values
    elif op == "max":
        out = torch.stack(vals).max(0).values
    else:  # avg
        if dtype.is_floating_point:
            return (sum(vals).double() / world).to(dtype)
        return torch.div(sum(vals), world, rounding_mode="trunc").to(dtype)
    if not dtype.is_floating_point and torch.iinfo(dtype).bits < 64:
        # integer results wrap like the type's own arithmetic
        bits = torch.iinfo(dtype).bits
        out = out % (1 << bits)
        if dtype.is_signed:
            out = torch.where(out >= 1 << (bits - 1), out - (1 << bits), out)
    return out.to(dtype)


def check_allreduce(rank, world):
    for dtype in REDUCE_TYPES:
        for name, op in OPS.items():
            for n in (0, 1, 13):
                t = value(rank, n, dtype)
                dist.all_reduce(t, op=op)
                assert_close(t, expected(name, world, n, dtype), msg=lambda m: "allreduce %s %s n=%d: %s" % (
                    name, dtype, n, m))
    big = value(rank, 300001, torch.float32)
    dist.all_reduce(big)
    assert_close(big, expected("sum", world, 300001, torch.float32))
    # premul_sum: scaled locally, then summed
    t = value(rank, 9, torch.float32)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    assert_close(t, expected("sum", world, 9, torch.float32) * 0.5)
    t = value(rank, 9, torch.float64)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum([torch.tensor([3.0], dtype=torch.float64)]))
    assert_close(t, expected("sum", world, 9, torch.float64) * 3)
    # bool: SUM is a logical or, PRODUCT a logical and; complex sums through its real view
    b = value(rank, 10, torch.bool)
    dist.all_reduce(b, op=dist.ReduceOp.SUM)
    assert torch.equal(b, torch.stack([value(r, 10, torch.bool) for r in range(world)]).any(0))
    b = value(rank, 10, torch.bool)
    dist.all_reduce(b, op=dist.ReduceOp.PRODUCT)
    assert torch.equal(b, torch.stack([value(r, 10, torch.bool) for r in range(world)]).all(0))
    c = torch.complex(value(rank, 6, torch.float32), -value(rank, 6, torch.float32, 1))
    dist.all_reduce(c)
    assert_close(c, torch.complex(expected("sum", world, 6, torch.float32), -expected("sum", world, 6, torch.float32, 1)))
    # coalesced: several tensors in one call
    ts = [value(rank, 5, torch.int64), value(rank, 3, torch.int64, 2)]
    dist.all_reduce_coalesced(ts, op=dist.ReduceOp.MAX)
    assert_close(ts[0], expected("max", world, 5, torch.int64))
    assert_close(ts[1], expected("max", world, 3, torch.int64, 2))


def check_noncontiguous(rank, world):
    m = value(rank, 24, torch.float32).reshape(4, 6)
    view = m[:, ::2]  # every other column
    assert not view.is_contiguous()
    dist.all_reduce(view)
    full = expected("sum", world, 24, torch.float32).reshape(4, 6)
    assert_close(m[:, ::2], full[:, ::2])
    assert_close(m[:, 1::2], value(rank, 24, torch.float32).reshape(4, 6)[:, 1::2])  # untouched
    t = value(rank, 12, torch.int32).reshape(3, 4).t()
    dist.broadcast(t, src=world - 1)
    assert torch.equal(t, value(world - 1, 12, torch.int32).reshape(3, 4).t())
    outs = [torch.zeros(4, 3, dtype=torch.int32).t() for _ in range(world)]
    dist.all_gather(outs, value(rank, 12, torch.int32).reshape(4, 3).t())
    for r in range(world):
        assert torch.equal(outs[r], value(r, 12, torch.int32).reshape(4, 3).t())


def check_rooted(rank, world):
    for dtype in MOVE_TYPES:
        for root in range(world):
            t = value(rank, 11, dtype)
            dist.broadcast(t, src=root)
            assert torch.equal(t, value(root, 11, dtype)), ("broadcast", dtype, root)
    for dtype in REDUCE_TYPES:
        for root in range(world):
            t = value(rank, 8, dtype)
            dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
            if rank == root:
                assert_close(t, expected("sum", world, 8, dtype))
    t = value(rank, 8, torch.float32)
    dist.reduce(t, dst=0, op=dist._make_nccl_premul_sum(2.0))
    assert_close(t, expected("sum", world, 8, torch.float32) * 2 if rank == 0 else value(rank, 8, torch.float32))
    for root in range(world):
        src = value(rank, 7, torch.float64)
        outs = [torch.zeros(7, dtype=torch.float64) for _ in range(world)] if rank == root else None
        dist.gather(src, gather_list=outs, dst=root)
        if rank == root:
            for r in range(world):
                assert torch.equal(outs[r], value(r, 7, torch.float64))
        out = torch.zeros(5, dtype=torch.int64)
        ins = [value(r, 5, torch.int64, root) for r in range(world)] if rank == root else None
        dist.scatter(out, scatter_list=ins, src=root)
        assert torch.equal(out, value(rank, 5, torch.int64, root))


def check_gather_scatter(rank, world):
    for dtype in MOVE_TYPES:
        outs = [torch.zeros(9, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, value(rank, 9, dtype))
        for r in range(world):
            assert torch.equal(outs[r], value(r, 9, dtype)), ("all_gather", dtype, r)
        flat = torch.zeros(world * 9, dtype=dtype)
        dist.all_gather_into_tensor(flat, value(rank, 9, dtype))
        assert torch.equal(flat, torch.cat([value(r, 9, dtype) for r in range(world)]))
    lists = [[torch.zeros(3) for _ in range(world)], [torch.zeros(2, 2) for _ in range(world)]]
    dist.all_gather_coalesced(lists, [value(rank, 3, torch.float32), value(rank, 4, torch.float32).reshape(2, 2)])
    for r in range(world):
        assert torch.equal(lists[0][r], value(r, 3, torch.float32))
        assert torch.equal(lists[1][r], value(r, 4, torch.float32).reshape(2, 2))
    for dtype in REDUCE_TYPES:
        for name in ("sum", "max", "avg"):
            # rank r contributes value(r, world*6)'s slices; this rank gets slice `rank` reduced
            full = expected(name, world, world * 6, dtype)
            ins = list(value(rank, world * 6, dtype).chunk(world))
            out = torch.zeros(6, dtype=dtype)
            dist.reduce_scatter(out, ins, op=OPS[name])
            assert_close(out, full[rank * 6:(rank + 1) * 6], msg=lambda m: "reduce_scatter %s %s" % (name, m))
            out = torch.zeros(6, dtype=dtype)
            dist.reduce_scatter_tensor(out, value(rank, world * 6, dtype), op=OPS[name])
            assert_close(out, full[rank * 6:(rank + 1) * 6])
    src = value(rank, world * 4, torch.float32)
    out = torch.zeros(4)
    dist.reduce_scatter_tensor(out, src, op=dist._make_nccl_premul_sum(0.25))
    assert_close(out, expected("sum", world, world * 4, torch.float32)[rank * 4:(rank + 1) * 4] * 0.25)
    assert torch.equal(src, value(rank, world * 4, torch.float32))  # the input is left alone


def rows(src, dst, world):
    """The rows rank `src` sends rank `dst` in the uneven all-to-all: src + dst + 1 of them."""
    return src + dst + 1


def check_alltoall(rank, world):
    for dtype in MOVE_TYPES:
        src = value(rank, world * 3, dtype)
        out = torch.zeros(world * 3, dtype=dtype)
        dist.all_to_all_single(out, src)
        want = torch.cat([value(r, world * 3, dtype)[rank * 3:(rank + 1) * 3] for r in range(world)])
        assert torch.equal(out, want), ("all_to_all_single", dtype)
    # uneven splits, 2-D rows
    in_splits = [rows(rank, d, world) for d in range(world)]
    out_splits = [rows(s, rank, world) for s in range(world)]
    src = torch.cat([torch.full((rows(rank, d, world), 2), 10 * rank + d, dtype=torch.float32) for d in range(world)])
    out = torch.zeros(sum(out_splits), 2)
    dist.all_to_all_single(out, src, output_split_sizes=out_splits, input_split_sizes=in_splits)
    want = torch.cat([torch.full((rows(s, rank, world), 2), 10 * s + rank, dtype=torch.float32) for s in range(world)])
    assert torch.equal(out, want)
    # lists of tensors of different sizes
    ins = [torch.full((rows(rank, d, world),), rank * 100 + d, dtype=torch.int64) for d in range(world)]
    outs = [torch.zeros(rows(s, rank, world), dtype=torch.int64) for s in range(world)]
    dist.all_to_all(outs, ins)
    for s in range(world):
        assert torch.equal(outs[s], torch.full((rows(s, rank, world),), s * 100 + rank, dtype=torch.int64))


def check_p2p(rank, world):
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for dtype in (torch.float32, torch.bfloat16, torch.int16):
        # every rank sends before it receives: the sends must not block
        send = value(rank, 1000, dtype)
        recv = torch.zeros(1000, dtype=dtype)
        works = [dist.isend(send, nxt), dist.irecv(recv, prv)]
        for w in works:
            w.wait()
        assert torch.equal(recv, value(prv, 1000, dtype))
    if rank == 0:
        dist.send(value(0, 100000, torch.float64), 1)
        back = torch.zeros(100000, dtype=torch.float64)
        dist.recv(back, 1)
        assert torch.equal(back, value(1, 100000, torch.float64))
    elif rank == 1:
        got = torch.zeros(200, 500, dtype=torch.float64).t()  # non-contiguous receive
        dist.recv(got, 0)
        assert torch.equal(got, value(0, 100000, torch.float64).reshape(500, 200))
        dist.send(value(1, 100000, torch.float64), 0)
    dist.barrier()


def check_work(rank, world):
    t = value(rank, 1000, torch.float32)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    chained = fut.then(lambda f: f.value()[0] * 2)
    assert work.wait()
    assert work.is_completed()
    assert_close(t, expected("sum", world, 1000, torch.float32))
    assert_close(fut.wait()[0], expected("sum", world, 1000, torch.float32))
    assert_close(chained.wait(), expected("sum", world, 1000, torch.float32) * 2)
    # many outstanding at once, completed in order
    ts = [value(rank, 50, torch.float64, s) for s in range(20)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    for s, w in enumerate(works):
        w.wait()
        assert_close(ts[s], expected("sum", world, 50, torch.float64, s))
    dist.barrier()


def check_subgroups(rank, world):
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    odds = dist.new_group([r for r in range(world) if r % 2 == 1])
    mine = evens if rank % 2 == 0 else odds
    members = [r for r in range(world) if r % 2 == rank % 2]
    t = value(rank, 6, torch.float32)
    dist.all_reduce(t, group=mine)
    assert_close(t, sum(value(r, 6, torch.float32) for r in members))
    t = value(rank, 6, torch.int32)
    dist.broadcast(t, src=members[-1], group=mine)
    assert torch.equal(t, value(members[-1], 6, torch.int32))
    outs = [torch.zeros(6, dtype=torch.int32) for _ in members]
    dist.all_gather(outs, value(rank, 6, torch.int32), group=mine)
    for i, r in enumerate(members):
        assert torch.equal(outs[i], value(r, 6, torch.int32))
    dist.barrier()


def expect_error(kind, words, fn):
    try:
        fn()
    except kind as e:
        for w in words:
            assert w in str(e), "%r not in %r" % (w, str(e))
        return
    raise AssertionError("no %s raised (expected one naming %s)" % (kind.__name__, words))


def check_bad_input(rank, world):
    expect_error(TypeError, ["allreduce", "Short"], lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)))
    expect_error(ValueError, ["BXOR", "not supported"], lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32),
                                                                                 op=dist.ReduceOp.BXOR))
    with torch.inference_mode():  # torch 1.13's dispatcher has no autograd kernel for these
        expect_error(ValueError, ["device", "meta"], lambda: dist.all_reduce(torch.ones(3, device="meta")))
        expect_error(ValueError, ["dense"], lambda: dist.all_reduce(torch.ones(3).to_sparse()))
    expect_error(ValueError, ["allgather", "elements"], lambda: dist.all_gather(
        [torch.zeros(4) for _ in range(world)], torch.zeros(3)))
    expect_error(ValueError, ["_allgather_base", "elements"], lambda: dist.all_gather_into_tensor(
        torch.zeros(world * 3 + 1), torch.zeros(3)))
    expect_error(ValueError, ["_reduce_scatter_base", "elements"], lambda: dist.reduce_scatter_tensor(
        torch.zeros(3), torch.zeros(world * 3 - 1)))
    expect_error(ValueError, ["alltoall_base", "add up"], lambda: dist.all_to_all_single(
        torch.zeros(world), torch.zeros(world), output_split_sizes=[1] * world, input_split_sizes=[2] * world))
    expect_error(ValueError, ["root rank"], lambda: dist.broadcast(torch.zeros(2), src=world + 3))
    expect_error(ValueError, ["itself"], lambda: dist.send(torch.zeros(2), rank))
    # nothing above reached the wire: the group still works
    t = value(rank, 4, torch.float32)
    dist.all_reduce(t)
    assert_close(t, expected("sum", world, 4, torch.float32))
    # sizes that differ across ranks: Tributary sees the mismatch; it breaks that group only
    other = dist.new_group(list(range(world)))
    expect_error(RuntimeError, ["allreduce", "mismatched"], lambda: dist.all_reduce(torch.ones(100 + rank),
                                                                                   group=other))
    expect_error(RuntimeError, ["failed earlier"], lambda: dist.all_reduce(torch.ones(4), group=other))
    t = value(rank, 4, torch.float32)
    dist.all_reduce(t)
    assert_close(t, expected("sum", world, 4, torch.float32))


def main(rank, world):
    assert dist.get_backend() == "tributary"
    check_allreduce(rank, world)
    check_noncontiguous(rank, world)
    check_rooted(rank, world)
    check_gather_scatter(rank, world)
    check_alltoall(rank, world)
    check_p2p(rank, world)
    check_work(rank, world)
    check_subgroups(rank, world)
    check_bad_input(rank, world)


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    launch.run(main, world)
    print("test_torch_ops: %d ranks OK" % world)
