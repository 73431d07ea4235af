"""A whole model from the mount to its first answer (bench/run.sh, phase
`attach`; opt-in: BENCH_PHASES=attach).

  python3 bench/attach_bench.py MOUNT TMPFS [QUICK]

A Llama of 7B's shape (bf16, random weights made here: no download; QUICK=1:
the same widths, 2 layers) is saved with save_pretrained into TMPFS and
copied into the mount with vyrefs cp. Each figure comes from fresh
processes, as after a restart (imports and the CUDA context are not timed;
the median of REPS):
  attach.vyrefs_first_ms   vyrefs.transformers.from_pretrained(mount) + one forward pass
  attach.vyrefs_load_ms    of which from_pretrained
  attach.vyrefs_own_ms     of which vyrefs' own work (load_state_dict + attach)
  attach.baseline_first_ms the same model built on meta (config, class,
                           empty weights: build_ms) + the same forward
                           (forward_ms) on weights already on the GPU
  attach.vs_baseline       vyrefs_first / baseline_first (target <= 1.1)
  attach.hf_tmpfs_first_ms transformers' from_pretrained(tmpfs, device_map="cuda") + forward
  attach.hf_mount_first_ms the same from the mount
  attach.speedup_tmpfs / attach.speedup_mount   those over vyrefs_first
  attach.model_mib         the weights
  attach.second_mib        device memory a second process attached beside a
                           first took (torch.cuda.mem_get_info before/after)
  attach.hf_mib            the same for from_pretrained from tmpfs
  attach.logits_equal      1 when vyrefs' answer is bit for bit transformers'
"""
import json
import os
import statistics
import subprocess
import sys
import time

import torch

MiB = 1 << 20


def config(quick):
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=2 if quick else 32,
                       num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
                       tie_word_embeddings=False, torch_dtype="bfloat16")


def dtype_kw():
    import transformers
    return "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"


def make(where, quick, **save):
    """Random weights on the GPU (no initialisation pass), saved by
    save_pretrained (with `save`'s arguments: max_shard_size=...)."""
    import transformers
    import vyrefs.torch
    with vyrefs.torch.empty_weights():
        model = transformers.LlamaForCausalLM(config(quick)).to(torch.bfloat16)
    g = torch.Generator(device="cuda").manual_seed(0)
    for mod in model.modules():
        for key, p in list(mod._parameters.items()):
            if p is not None:
                t = torch.empty(p.shape, dtype=torch.bfloat16, device="cuda")
                t.normal_(0, 0.02, generator=g)
                mod._parameters[key] = torch.nn.Parameter(t, requires_grad=False)
    model.save_pretrained(where, **save)
    return sum(p.numel() * p.element_size() for p in model.parameters())


def ids():
    return torch.randint(0, 32000, (1, 128), generator=torch.Generator().manual_seed(1)).cuda()


def digest(t):
    import hashlib
    return hashlib.sha256(t.float().cpu().numpy().tobytes()).hexdigest()


def warm():
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    return ids()


def one(mode, path, flags=None):
    """In a fresh process: one way to the first answer, as JSON."""
    import transformers
    import vyrefs.torch
    import vyrefs.transformers
    x = warm()
    own = [0.0]

    def timed(f):
        def g(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                own[0] += time.perf_counter() - t
        return g

    out = {}
    free0, _ = torch.cuda.mem_get_info()
    t0 = time.perf_counter()
    if mode == "vyrefs":
        vyrefs.torch.load_state_dict = timed(vyrefs.torch.load_state_dict)
        vyrefs.torch.attach = timed(vyrefs.torch.attach)
        model = vyrefs.transformers.from_pretrained(path)
    elif mode == "hf":
        model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="cuda",
                                                                  **{dtype_kw(): torch.bfloat16})
    else:  # meta: what any load costs beyond the weights: config, class, empty model
        cfg = transformers.AutoConfig.from_pretrained(path)
        cls = getattr(transformers, cfg.architectures[0])
        with vyrefs.torch.empty_weights():
            model = cls._from_config(cfg, **{dtype_kw(): torch.bfloat16})
        model.eval()
        out["build_ms"] = (time.perf_counter() - t0) * 1e3
        for mod in model.modules():  # weights already on the GPU (not timed)
            for key, p in list(mod._parameters.items()):
                if p is not None:
                    mod._parameters[key] = torch.nn.Parameter(torch.zeros(p.shape, dtype=p.dtype, device="cuda"),
                                                              requires_grad=False)
            for key, b in list(mod._buffers.items()):
                if b is not None:
                    mod._buffers[key] = b.cuda()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
    torch.cuda.synchronize()
    out["load_ms"] = (time.perf_counter() - t0) * 1e3
    free1, _ = torch.cuda.mem_get_info()
    with torch.no_grad():
        logits = model(x).logits
    torch.cuda.synchronize()
    out["first_ms"] = (time.perf_counter() - t0) * 1e3 + out.get("build_ms", 0)
    out["forward_ms"] = out["first_ms"] - out["load_ms"] - out.get("build_ms", 0)
    out["own_ms"] = own[0] * 1e3
    out["took_mib"] = (free0 - free1) / MiB
    out["logits"] = digest(logits)
    print(json.dumps(out), flush=True)
    if flags:  # hold the model until told
        open(os.path.join(flags, "ready"), "w").close()
        for _ in range(3000):
            if os.path.exists(os.path.join(flags, "done")):
                break
            time.sleep(0.1)


def run(*args, background=False):
    cmd = [sys.executable, os.path.abspath(__file__), "one"] + list(args)
    if background:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def put(k, v):
    print("attach.%s %.3f" % (k, v), flush=True)


def main(mnt, tmp, quick):
    src, dst = os.path.join(tmp, "llama"), os.path.join(mnt, "llama")
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "make", src, "1" if quick else "0"],
                       stdout=subprocess.PIPE, text=True, check=True)
    put("model_mib", int(r.stdout.split()[-1]) / MiB)
    vy = os.environ.get("VYREFS_BIN", "vyrefs")
    subprocess.run([vy, "cp", "-r", src, mnt + "/"], check=True)
    reps = 3 if quick else int(os.environ.get("BENCH_REPS", "3"))
    med = lambda xs, k: statistics.median(x[k] for x in xs)  # noqa: E731
    ours = [run("vyrefs", dst) for _ in range(reps)]
    meta = [run("meta", src) for _ in range(reps)]
    put("vyrefs_first_ms", med(ours, "first_ms"))
    put("vyrefs_load_ms", med(ours, "load_ms"))
    put("vyrefs_own_ms", med(ours, "own_ms"))
    put("build_ms", med(meta, "build_ms"))
    put("forward_ms", med(meta, "forward_ms"))
    put("baseline_first_ms", med(meta, "first_ms"))
    put("vs_baseline", med(ours, "first_ms") / med(meta, "first_ms"))
    hf_reps = 1  # ~10 s each at 7B
    hft = [run("hf", src) for _ in range(hf_reps)]
    hfm = [run("hf", dst) for _ in range(hf_reps)]
    put("hf_tmpfs_first_ms", med(hft, "first_ms"))
    put("hf_mount_first_ms", med(hfm, "first_ms"))
    put("speedup_tmpfs", med(hft, "first_ms") / med(ours, "first_ms"))
    put("speedup_mount", med(hfm, "first_ms") / med(ours, "first_ms"))
    put("logits_equal", float(all(x["logits"] == hft[0]["logits"] for x in ours + hfm)))
    # Two processes at once: the second's attach takes no device memory for weights.
    flags = os.path.join(tmp, "flags")
    os.makedirs(flags, exist_ok=True)
    first = run("vyrefs", dst, flags, background=True)
    for _ in range(3000):
        if os.path.exists(os.path.join(flags, "ready")) or first.poll() is not None:
            break
        time.sleep(0.1)
    second = run("vyrefs", dst)
    open(os.path.join(flags, "done"), "w").close()
    first.wait()
    put("second_mib", second["took_mib"])
    put("hf_mib", hft[0]["took_mib"])


if __name__ == "__main__":
    if sys.argv[1] == "one":
        one(*sys.argv[2:])
    elif sys.argv[1] == "make":
        print(make(sys.argv[2], sys.argv[3] == "1"))
    else:
        main(sys.argv[1], sys.argv[2], len(sys.argv) > 3 and sys.argv[3] == "1")
