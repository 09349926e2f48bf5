"""A rank killed mid-training: every other rank's next operation raises, within the process
group's timeout, an error that names the dead rank; later operations fail at once."""
import os
import signal
import time

import torch
import torch.distributed as dist

import launch

WORLD, VICTIM, TIMEOUT_S = 3, 2, 10


def main(rank, world):
    model = torch.nn.Linear(256, 256)
    t0 = None
    for step in range(1000):
        if step == 5 and rank == VICTIM:
            os.kill(os.getpid(), signal.SIGKILL)
        grads = [p.detach().clone() for p in model.parameters()]
        t0 = time.monotonic()
        try:
            for g in grads:
                dist.all_reduce(g)
        except RuntimeError as e:
            elapsed = time.monotonic() - t0
            msg = str(e)
            assert step == 5, "failed at step %d, not when rank %d died: %s" % (step, VICTIM, msg)
            assert "rank %d" % VICTIM in msg, "the error does not name rank %d: %s" % (VICTIM, msg)
            assert elapsed < TIMEOUT_S + 5, "raised after %.1f s, the timeout is %d s" % (elapsed, TIMEOUT_S)
            print("rank %d raised after %.2f s: %s" % (rank, elapsed, msg.splitlines()[0]), flush=True)
            break
    else:
        raise AssertionError("no operation failed after rank %d died" % VICTIM)
    # the group stays broken: the next call fails at once, with the first error
    t1 = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4))
        raise AssertionError("an operation after the failure succeeded")
    except RuntimeError as e:
        assert "failed earlier" in str(e) and "rank %d" % VICTIM in str(e), str(e)
    assert time.monotonic() - t1 < 2


if __name__ == "__main__":
    launch.run(main, WORLD, timeout_s=TIMEOUT_S, deadline_s=60, dying=(VICTIM,))
    print("test_torch_fault: rank %d killed, the others raised naming it" % VICTIM)
