"""The model side of tests/gpu/gpu_devices_test.sh (two GPUs): each command
prints lines the suite compares.

  devices_check.py save TMP          a TinyLlama-shaped 1.1B (random, bf16),
                                     save_pretrained in 500 MB shards into TMP/tl
  devices_check.py compare DIR SRC   vyrefs.transformers.from_pretrained(DIR) with
                                     no device_map, against transformers' own load
                                     of SRC on one GPU and with the same device map
  devices_check.py moe DIR SRC       the same for a mixture of experts whose files
                                     sit on both GPUs (transformers converts it):
                                     where its converted copy went, what it copied
"""
import os
import sys
import warnings

import torch

import vyrefs.transformers
from attach_check import dtype_kw, random_tiny_llama


def save(tmp):
    model = random_tiny_llama()
    model.save_pretrained(os.path.join(tmp, "tl"), max_shard_size="500MB")
    print("shards", len([f for f in os.listdir(os.path.join(tmp, "tl")) if f.endswith(".safetensors")]))


def split_layers(where):
    """Layers whose tensors sit in files on two GPUs."""
    import json
    with open(os.path.join(where, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    dev = {fn: int(os.getxattr(os.path.join(where, fn), "user.vyre.device")) for fn in set(weight_map.values())}
    seen = {}
    for name, fn in weight_map.items():
        if ".layers." in name:
            seen.setdefault(name.split(".layers.")[1].split(".")[0], set()).add(dev[fn])
    return sum(1 for d in seen.values() if len(d) > 1)


def compare(where, src):
    import transformers
    torch.cuda.init()
    split = split_layers(where)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ours = vyrefs.transformers.from_pretrained(where)
    copied = ours.vyrefs_copied_bytes
    devices = sorted({p.device.index for p in ours.parameters()})
    kw = {dtype_kw(transformers): torch.bfloat16}
    ids = torch.randint(0, ours.config.vocab_size, (2, 64), generator=torch.Generator().manual_seed(7)).cuda(0)
    gen = dict(max_new_tokens=16, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        a = ours(ids).logits
        ga = ours.generate(ids[:1, :32], **gen)
    dmap = getattr(ours, "hf_device_map", None) or {"": devices[0]}
    del ours
    torch.cuda.empty_cache()
    with torch.no_grad():
        same = transformers.AutoModelForCausalLM.from_pretrained(src, device_map=dmap, **kw)
        b = same(ids).logits
        gb = same.generate(ids[:1, :32], **gen)
        del same
        torch.cuda.empty_cache()
        one = transformers.AutoModelForCausalLM.from_pretrained(src, device_map="cuda:0", **kw)
        c = one(ids).logits
    warned = any("copied %d bytes" % copied in str(w.message) for w in said)
    print("runs on", ",".join(map(str, devices)), "copied only for split layers", (copied > 0) == (split > 0),
          "said so", warned == (copied > 0))
    print("logits equal to the same map", torch.equal(a.cpu(), b.cpu()), "greedy equal", torch.equal(ga.cpu(), gb.cpu()))
    print("logits equal to one GPU", torch.equal(a.cpu(), c.cpu()))
    sys.stderr.write("%d layers split across GPUs; copied %d bytes; device map %s\n"
                     % (split, copied, sorted(set(map(str, dmap.values())))))


def moe(where, src):
    import transformers
    torch.cuda.init()
    kw = {dtype_kw(transformers): torch.bfloat16}
    ours = vyrefs.transformers.from_pretrained(where, dtype=torch.bfloat16)
    made = ours.vyrefs_converted
    files = sorted(f for f in os.listdir(made) if f.endswith(".safetensors"))
    on = sorted({int(os.getxattr(os.path.join(made, f), "user.vyre.device")) for f in files})
    devices = sorted({p.device.index for p in ours.parameters()})
    ids = torch.randint(1, 990, (2, 24), generator=torch.Generator().manual_seed(3)).cuda(0)
    gen = dict(max_new_tokens=32, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        a = ours(ids).logits
        ga = ours.generate(ids[:1, :16], **gen)
    dmap = ours.hf_device_map
    theirs = transformers.AutoModelForCausalLM.from_pretrained(src, device_map=dmap, **kw).eval()
    with torch.no_grad():
        b = theirs(ids).logits
        gb = theirs.generate(ids[:1, :16], **gen)
    print("converted on", ",".join(map(str, on)), "runs on", ",".join(map(str, devices)),
          "copied", ours.vyrefs_copied_bytes)
    print("logits equal to the same map", torch.equal(a.cpu(), b.cpu()), "greedy equal", torch.equal(ga.cpu(), gb.cpu()))
    sys.stderr.write("converted files %s; device map %s\n" % (len(files), sorted(set(map(str, dmap.values())))))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"save": save, "compare": compare, "moe": moe}[cmd](*args)
