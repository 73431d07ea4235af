"""Tensor-parallel ranks keeping their shards resident (issue "gpus"): two
ranks (NCCL, one GPU each) hold the Megatron split of a Llama's weights
(1.1B or 7B shapes, bf16, random), saved once with vyrefs.ranks.save; each
restart is a new job whose ranks attach them. Prints, per shape:

  ranks.SHAPE.save_s            the first save, both ranks (seconds)
  ranks.SHAPE.attach_ms.rR      vyrefs.ranks.attach in rank R of a new job:
                                median and quartiles over RESTARTS jobs
  ranks.SHAPE.again_ms          by part, medians: the first attach's
                                (first_check, first_map: load_state_dict,
                                first_attach: the rest) and a second attach's
                                in the same process (check, map, attach)
  ranks.SHAPE.second_job_mib    device memory a second job took attaching
                                beside a first that holds the shards (MiB)
  ranks.SHAPE.same_answer       every job's answer equal to the saver's

  python3 bench/ranks_bench.py MNT [RESTARTS] [GPUS]

MNT is a devices=0,1 mount. GPUS=1 (a machine of one GPU, MNT a mount of
it) runs both ranks on GPU 0 with gloo, as NCCL refuses two ranks on one
GPU: a stand-in that shares one GPU's copy engines and the host's cores
between the ranks, so compare its figures only with each other.
"""
import contextlib
import hashlib
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SHAPES = {"1.1b": dict(hidden=2048, inner=5632, layers=22, heads=32, kv=4, vocab=32000),
          "7b": dict(hidden=4096, inner=11008, layers=32, heads=32, kv=32, vocab=32000)}


def shard_shapes(c, world):
    """{name: shape} of one rank's part: q, k, v, gate, up and the embedding
    split by rows; o and down by columns; norms whole."""
    h, i, hd = c["hidden"], c["inner"], c["hidden"] // c["heads"]
    out = {"model.embed_tokens.weight": (c["vocab"] // world, h), "lm_head.weight": (c["vocab"] // world, h),
           "model.norm.weight": (h,)}
    for n in range(c["layers"]):
        p = "model.layers.%d." % n
        out.update({p + "self_attn.q_proj.weight": (h // world, h), p + "self_attn.k_proj.weight": (c["kv"] * hd // world, h),
                    p + "self_attn.v_proj.weight": (c["kv"] * hd // world, h), p + "self_attn.o_proj.weight": (h, h // world),
                    p + "mlp.gate_proj.weight": (i // world, h), p + "mlp.up_proj.weight": (i // world, h),
                    p + "mlp.down_proj.weight": (h, i // world), p + "input_layernorm.weight": (h,),
                    p + "post_attention_layernorm.weight": (h,)})
    return out


def empty_model(shapes):
    """A module tree with a meta parameter at every name."""
    root = torch.nn.Module()
    for name, shape in shapes.items():
        mod = root
        *path, key = name.split(".")
        for part in path:
            if not hasattr(mod, part):
                mod.add_module(part, torch.nn.Module())
            mod = getattr(mod, part)
        mod.register_parameter(key, torch.nn.Parameter(torch.empty(shape, dtype=torch.bfloat16, device="meta"),
                                                       requires_grad=False))
    return root


def answer(tensors):
    """An all-reduced digest of every rank's tensors: equal only if every
    rank holds the same bytes as the saver's."""
    acc = torch.zeros((), dtype=torch.float64, device="cuda")
    for k, (_, t) in enumerate(sorted(tensors)):
        acc += t.float().sum().double() * (k + 1)
    if dist.get_backend() == "gloo":
        acc = acc.cpu()  # gloo reduces host tensors
    dist.all_reduce(acc)
    return hashlib.sha256(acc.cpu().numpy().tobytes()).hexdigest()[:16]


@contextlib.contextmanager
def _timed(module, name, into, key):
    """module.name timed into into[key] (seconds) while inside: the parts
    of the first attach, which pays what only a new process pays."""
    f = getattr(module, name)

    def timed(*args, **kwargs):
        t = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            into[key] = into.get(key, 0) + time.perf_counter() - t
    setattr(module, name, timed)
    try:
        yield
    finally:
        setattr(module, name, f)


def rank_main(rank, world, port, where, shape, phase, hold, q, gpus=2):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    import vyrefs.ranks
    torch.cuda.set_device(rank if gpus == 2 else 0)
    dist.init_process_group("nccl" if gpus == 2 else "gloo")
    torch.zeros(1, device="cuda")  # the context, outside what is timed
    shapes = shard_shapes(SHAPES[shape], world)
    config = dict(SHAPES[shape], split="megatron", world=world)
    dist.barrier()
    if phase == "save":
        g = torch.Generator(device="cuda").manual_seed(rank)
        tensors = {n: torch.randn(s, dtype=torch.bfloat16, device="cuda", generator=g) * 0.02 for n, s in shapes.items()}
        t0 = time.perf_counter()
        vyrefs.ranks.save(tensors, where, config=config)
        took = time.perf_counter() - t0
        q.put((rank, "save", took, 0, answer(tensors.items()), {}))
    else:
        import vyrefs.torch
        model = empty_model(shapes)
        free0 = torch.cuda.mem_get_info()[0]
        first = {}
        with _timed(vyrefs.ranks, "check", first, "first_check"), \
                _timed(vyrefs.torch, "load_state_dict", first, "first_map"):
            t0 = time.perf_counter()
            vyrefs.ranks.attach(model, where, config=config)
            took = time.perf_counter() - t0
        first["first_attach"] = took - sum(first.values())
        took_mem = free0 - torch.cuda.mem_get_info()[0]
        # Where the time goes, in a second attach of the same process.
        parts = dict(first)
        # The models are built before each clock starts (the job's own
        # work, as in the first attach).
        again = empty_model(shapes)
        t = time.perf_counter()
        vyrefs.ranks.check(again, where, config=config)
        parts["check"] = time.perf_counter() - t
        t = time.perf_counter()
        sd = vyrefs.torch.load_state_dict(vyrefs.ranks.rank_dir(where, rank, world))
        parts["map"] = time.perf_counter() - t
        t = time.perf_counter()
        vyrefs.torch.attach(again, sd)
        parts["attach"] = time.perf_counter() - t
        q.put((rank, "attach", took, took_mem, answer(model.named_parameters()), parts))
        if hold:
            while not os.path.exists(hold):
                time.sleep(0.05)
    dist.barrier()
    dist.destroy_process_group()


def job(where, shape, phase, hold=None, wait=True, gpus=2):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, 2, port, where, shape, phase, hold, q, gpus)) for r in range(2)]
    for p in procs:
        p.start()
    got = sorted(q.get(timeout=600) for _ in procs)
    if wait:
        for p in procs:
            p.join()
    return got, procs


def quartiles(xs):
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return "%.2f [%.2f, %.2f]" % (q[1], q[0], q[2])


def main(mnt, restarts="5", gpus="2"):
    gpus = int(gpus)
    if gpus not in (1, 2):
        sys.exit("ranks_bench: GPUS is 1 or 2 (Fix: 2 on a devices=0,1 mount, 1 on a mount of one GPU)")
    print("ranks.gpus %d" % gpus)  # 1: both ranks on GPU 0, gloo (a stand-in)
    print("ranks.backend %s" % ("nccl" if gpus == 2 else "gloo"), flush=True)
    for shape in ("1.1b", "7b"):
        where = os.path.join(mnt, "tp-" + shape)
        saved, _ = job(where, shape, "save", gpus=gpus)
        print("ranks.%s.save_s %.2f" % (shape, max(s[2] for s in saved)), flush=True)
        want = saved[0][4]
        same, ms, parts = True, {0: [], 1: []}, {}
        for _ in range(int(restarts)):
            got, _ = job(where, shape, "attach", gpus=gpus)
            for rank, _, took, _, ans, part in got:
                ms[rank].append(took * 1000)
                same &= ans == want
                for k, v in part.items():
                    parts.setdefault(k, []).append(v * 1000)
        for rank in (0, 1):
            print("ranks.%s.attach_ms.r%d %s" % (shape, rank, quartiles(ms[rank])), flush=True)
        print("ranks.%s.again_ms %s" % (shape, " ".join("%s=%.2f" % (k, statistics.median(v)) for k, v in parts.items())))
        hold = os.path.join(mnt, ".ranks-bench-hold")
        first, procs = job(where, shape, "attach", hold=hold, wait=False, gpus=gpus)
        second, _ = job(where, shape, "attach", gpus=gpus)
        open(hold, "w").close()
        for p in procs:
            p.join()
        os.unlink(hold)
        same &= all(g[4] == want for g in first + second)
        print("ranks.%s.second_job_mib %s" % (shape, " ".join("r%d=%d" % (g[0], g[3] >> 20) for g in second)))
        print("ranks.%s.same_answer %s" % (shape, same), flush=True)
        import shutil
        shutil.rmtree(where)


if __name__ == "__main__":
    main(*sys.argv[1:])
