"""Runs a test function in N processes of one torch.distributed group and reports each rank's
failure (with its traceback). Used by the tests/python/test_torch_*.py scripts."""
import datetime
import faulthandler
import multiprocessing as mp
import os
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist

import torch_tributary  # noqa: F401  (registers "tributary")


def _child(fn, rank, world, store_path, backend, timeout_s, deadline_s, queue, args):
    # A rank still running near the deadline prints where it is, then exits.
    faulthandler.dump_traceback_later(max(deadline_s - 5, 1), exit=True)
    try:
        torch.set_num_threads(1)
        dist.init_process_group(backend, init_method="file://" + store_path, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout_s))
        fn(rank, world, *args)
        dist.destroy_process_group()
        queue.put((rank, None))
    except BaseException:  # noqa: B902  (report everything, exit codes alone say too little)
        queue.put((rank, traceback.format_exc()))
        queue.close()
        queue.join_thread()  # the report is sent before this process ends
        os._exit(1)


def run(fn, world, backend="tributary", timeout_s=60, deadline_s=240, args=(), dying=()):
    """Runs fn(rank, world, *args) on `world` fork()ed ranks; raises if any rank failed. The
    ranks in `dying` are expected to die without a report."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [ctx.Process(target=_child, args=(fn, r, world, store, backend, timeout_s, deadline_s, queue, args))
                 for r in range(world)]
        for p in procs:
            p.start()
        results = {}
        try:
            for _ in range(world - len(dying)):
                rank, err = queue.get(timeout=deadline_s)
                results[rank] = err
        except Exception:
            missing = sorted(set(range(world)) - set(results) - set(dying))
            results.update({r: "no result within %d s" % deadline_s for r in missing})
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    failed = {r: e for r, e in results.items() if e}
    if failed:
        for r in sorted(failed):
            print("rank %d failed:\n%s" % (r, failed[r]), file=sys.stderr)
        raise SystemExit("%d of %d ranks failed" % (len(failed), world))
    return results
