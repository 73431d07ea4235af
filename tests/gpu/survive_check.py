"""The GPU side of tests/gpu/gpu_survive_test.sh: a Llama attached from a
survive=on mount answers through the daemon's deaths.

  survive_check.py hold MNT FLAGS   attach MNT/llama, print the logits' digest,
                                    make FLAGS/ready; then for each FLAGS/ask.N
                                    answer again: print "N DIGEST", make
                                    FLAGS/answered.N; until FLAGS/done
  survive_check.py once MNT         attach MNT/llama in a new process, print
                                    the logits' digest
"""
import hashlib
import os
import sys
import time

import torch

import vyrefs.transformers


def digest(model):
    ids = torch.randint(0, 1000, (2, 24), generator=torch.Generator().manual_seed(3)).cuda()
    with torch.no_grad():
        logits = model(ids).logits
    torch.cuda.synchronize()
    return hashlib.sha256(logits.float().cpu().numpy().tobytes()).hexdigest()[:16]


def attach(mnt):
    return vyrefs.transformers.from_pretrained(os.path.join(mnt, "llama"), dtype=torch.bfloat16)


def hold(mnt, flags):
    model = attach(mnt)
    print(digest(model), flush=True)
    open(os.path.join(flags, "ready"), "w").close()
    answered = 0
    for _ in range(3000):  # until the suite says done (at most 5 minutes)
        if os.path.exists(os.path.join(flags, "done")):
            break
        if os.path.exists(os.path.join(flags, "ask.%d" % (answered + 1))):
            answered += 1
            print(answered, digest(model), flush=True)
            open(os.path.join(flags, "answered.%d" % answered), "w").close()
        time.sleep(0.1)


def once(mnt):
    print(digest(attach(mnt)))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"hold": hold, "once": once}[cmd](*args)
