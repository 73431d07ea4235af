"""One rank of a tensor-parallel job for the ranks tests (attach_test.sh on
the host backend with gloo, gpu_devices_test.sh on two GPUs with NCCL):
a two-layer MLP split as Megatron splits it (the first layer by rows, the
second by columns, an all-reduce after). `run N ...` starts N ranks with
the environment torchrun gives them (Debian 12's torchrun fails on its
Python), and prints their output, rank by rank.

  ranks_check.py run N CMD DIR [HOW]
  ranks_check.py save DIR        random weights, vyrefs.ranks.save, the answer
  ranks_check.py attach DIR      built empty, vyrefs.ranks.attach, the answer
  ranks_check.py attach DIR swap the same, each rank on the other's GPU
  ranks_check.py attach DIR other-config
  ranks_check.py hold DIR HOLD   attach and answer, then (rank 0) touch
                                 HOLD/ready, wait for HOLD/go, answer again

Rank 0 prints "answer DIGEST" (the all-reduced output's bytes, hashed) or
"refused: MESSAGE"; every rank prints "mapped True/False".
"""
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist

import vyrefs.ranks
import vyrefs.torch

HIDDEN, INNER = 256, 1024


class Part(torch.nn.Module):
    def __init__(self, world):
        super().__init__()
        self.up = torch.nn.Linear(HIDDEN, INNER // world, bias=False)
        self.down = torch.nn.Linear(INNER // world, HIDDEN, bias=False)

    def forward(self, x):
        y = self.down(torch.nn.functional.gelu(self.up(x)))
        dist.all_reduce(y)
        return y


def leave():
    """Every rank ends here together, and exits at once: torch 2.6's
    destroy_process_group waited on rank 0's store after rank 0 had
    exited (Debian 13: the job hung)."""
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


def main(cmd, where, how=""):
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ["LOCAL_RANK"])
    gpu = (1 - local) if how == "swap" else local  # hold: HOW is a directory
    if cuda:
        torch.cuda.set_device(gpu)
    elif how == "swap":
        os.environ["LOCAL_RANK"] = str(gpu)
    dev = torch.device("cuda", gpu) if cuda else torch.device("cpu")
    config = {"hidden": HIDDEN, "inner": INNER, "split": "megatron-mlp", "seed": 3}
    if how == "other-config":
        config["seed"] = 4
    if cmd == "save":
        torch.manual_seed(3 + rank)
        model = Part(world).to(dev)
        vyrefs.ranks.save(model, where, config=config)
    else:
        with vyrefs.torch.empty_weights():
            model = Part(world)
        try:
            vyrefs.ranks.attach(model, where, config=config)
        except ValueError as e:
            if rank == 0:
                print("refused:", str(e).split(" (Fix")[0])
            leave()
    x = torch.arange(8 * HIDDEN, dtype=torch.float32, device=dev).reshape(8, HIDDEN) / (8 * HIDDEN)

    def answer(word):
        with torch.no_grad():
            y = model(x)
        if rank == 0:
            print(word, hashlib.sha256(y.cpu().numpy().tobytes()).hexdigest()[:16], flush=True)

    answer("answer")
    mapped = cmd == "save" or all(p.device == dev for p in model.parameters())
    print("rank", rank, "mapped", mapped, flush=True)
    if cmd == "hold":
        if rank == 0:
            open(os.path.join(how, "ready"), "w").close()
        while not os.path.exists(os.path.join(how, "go")):
            time.sleep(0.05)
        answer("again")
    leave()


def run(n, *args):
    import socket
    import subprocess
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(int(n)):
        # USE_LIBUV=0: Debian 13's torch 2.6 is built without libuv, which
        # torch's TCPStore asks for by default (torch 2.4 and later read it).
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.setdefault("USE_LIBUV", "0")
        procs.append(subprocess.Popen([sys.executable, __file__] + list(args), env=env, stdout=subprocess.PIPE))
    # A rank that failed leaves the others waiting in a collective (gloo
    # waits 30 minutes): they are killed at once; once one has ended the
    # rest get 60 s, and every rank 300 s in all.
    deadline = time.monotonic() + 300
    while any(p.poll() is None for p in procs):
        if any(p.returncode is not None for p in procs):
            deadline = min(deadline, time.monotonic() + 60)
        if any(p.returncode not in (None, 0) for p in procs) or time.monotonic() > deadline:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            break
        time.sleep(0.05)
    rc = 0
    for p in procs:
        out, _ = p.communicate()
        sys.stdout.write(out.decode())
        rc |= 1 if p.returncode else 0
    sys.exit(rc)


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(*sys.argv[2:])
    else:
        main(*sys.argv[1:])
