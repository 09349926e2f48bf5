"""torchrun starts the ranks and the tributary backend rendezvouses through env:// as a user's
training script would: `torchrun --nproc_per_node=N script.py` with
`dist.init_process_group("tributary")` and nothing else set. Run without arguments beyond the
world size, this file launches torchrun on itself (static rendezvous on 127.0.0.1, a free port)
and checks that every rank reported its results; with --worker it is one rank."""
import os
import socket
import subprocess
import sys
import tempfile

WORKER = "--worker"


def worker():
    import datetime

    import torch
    import torch.distributed as dist

    import torch_tributary  # noqa: F401  (registers "tributary")

    torch.set_num_threads(1)
    # env:// is the default: MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE come from torchrun.
    dist.init_process_group("tributary", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"]), (rank, world)
    assert dist.get_backend() == "tributary", dist.get_backend()

    t = torch.arange(5, dtype=torch.float32) + rank
    dist.all_reduce(t)
    want = torch.arange(5, dtype=torch.float32) * world + world * (world - 1) / 2
    assert torch.equal(t, want), (t, want)

    parts = [torch.zeros(2, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(parts, torch.tensor([rank, rank * 10]))
    assert [p.tolist() for p in parts] == [[r, r * 10] for r in range(world)], parts

    # A subgroup of the even ranks: new_group goes through the same store torchrun made.
    evens = list(range(0, world, 2))
    group = dist.new_group(evens, backend="tributary")
    if rank in evens:
        s = torch.tensor([rank + 1])
        dist.all_reduce(s, group=group)
        assert s.item() == sum(r + 1 for r in evens), s
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d of %d ok" % (rank, world), flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world):
    try:
        import torch.distributed.run  # noqa: F401
    except ImportError as e:
        print("SKIPPED: torchrun is not available (%s)" % e)
        return 77
    with tempfile.TemporaryDirectory() as logs:
        # Debian's torch 1.13 on Python 3.11 cannot parse torchrun's default --redirects/--tee "0"
        # (Std.from_str returns None for it, and the agent fails), so name them: each rank's
        # stdout to the console and its log, its stderr to its log (printed on failure).
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=%d" % world,
               "--rdzv_backend=static", "--master_addr=127.0.0.1", "--master_port=%d" % free_port(),
               "--max_restarts=0", "--redirects=2", "--tee=1", "--log_dir=" + logs, os.path.abspath(__file__),
               WORKER]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        try:
            run = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 timeout=240)
            out, rc = run.stdout, run.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = "%s\ntorchrun did not finish within 240 s" % (e.output or ""), None
        print(out)
        ok = [line for line in out.splitlines() if line.endswith(" of %d ok" % world)]
        if rc != 0 or len(ok) != world:
            for root, _, files in os.walk(logs):
                for name in sorted(files):
                    with open(os.path.join(root, name), errors="replace") as f:
                        print("--- %s:\n%s" % (os.path.relpath(os.path.join(root, name), logs), f.read()))
            print("FAILED: torchrun exited %s and %d of %d ranks reported ok" % (rc, len(ok), world))
            return 1
    print("torchrun with %d ranks over env://: every rank ok" % world)
    return 0


if __name__ == "__main__":
    if WORKER in sys.argv:
        worker()
    else:
        sys.exit(launch(int(sys.argv[1]) if len(sys.argv) > 1 else 2))
