"""The GPU side of tests/gpu/gpu_attach_test.sh: each command prints lines
the suite compares.

  attach_check.py llama-save TMP             random tiny Llamas (untied, tied),
                                             save_pretrained sharded into TMP
  attach_check.py llama-compare MNT TMP      vyrefs.transformers.from_pretrained(MNT/x)
                                             against transformers' from TMP/x
  attach_check.py net-save MNT               attach_models.Net on the GPU, sharded
  attach_check.py net-hold MNT DIR           attach, answer, say "ready", wait for DIR/done
  attach_check.py net-second MNT             attach beside it: device memory it took
  attach_check.py processed MNT              transposed/scaled tensors saved, attached back
  attach_check.py dlpack MNT                 a mapped tensor into cupy and jax
  attach_check.py exact-save TMP             a TinyLlama-shaped 1.1B (random, bf16) saved
                                             in 500 MB shards whose headers end at 8 mod 16
  attach_check.py exact-compare MNT TMP      its parameters' alignment, logits and 16 greedy
                                             tokens against transformers' own load from TMP
  attach_check.py saved-into MNT             a Qwen2.5-0.5B-shaped model (4 layers, random,
                                             bf16, tied) saved by save_pretrained straight
                                             into MNT/qwen: its shards' placement, and its
                                             alignment, logits and 32 greedy tokens against
                                             transformers' own load of the same files
"""
import os
import sys
import time

import torch

import attach_models as am
import vyrefs.torch

MiB = 1 << 20


def llama_configs():
    from transformers import LlamaConfig
    base = dict(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=256)
    return {"llama": LlamaConfig(tie_word_embeddings=False, **base),
            "tied": LlamaConfig(tie_word_embeddings=True, **base)}


def dtype_kw(transformers):
    return "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"


def llama_save(tmp):
    from transformers import LlamaForCausalLM
    for name, config in llama_configs().items():
        torch.manual_seed(11)
        model = LlamaForCausalLM(config).to(torch.bfloat16)
        model.save_pretrained(os.path.join(tmp, name), max_shard_size="300KB")
        print(name, len([f for f in os.listdir(os.path.join(tmp, name)) if f.endswith(".safetensors")]) > 1)


def llama_compare(mnt, tmp):
    import transformers
    ids = torch.randint(0, 1000, (2, 24), generator=torch.Generator().manual_seed(3)).cuda()
    torch.cuda.init()
    for name in ("llama", "tied"):
        before = torch.cuda.memory_allocated()
        ours = vyrefs.transformers.from_pretrained(os.path.join(mnt, name), dtype=torch.bfloat16)
        took = torch.cuda.memory_allocated() - before
        theirs = transformers.AutoModelForCausalLM.from_pretrained(
            os.path.join(tmp, name), device_map="cuda", **{dtype_kw(transformers): torch.bfloat16})
        weights = sum(p.numel() * p.element_size() for p in theirs.parameters())
        with torch.no_grad():
            a, b = ours(ids).logits, theirs(ids).logits
        same = [k for k, v in theirs.state_dict().items() if torch.equal(v, ours.state_dict()[k])]
        inv = [(n, b) for n, b in theirs.named_buffers() if n.endswith("inv_freq")]
        if not all(torch.equal(b.cuda(), dict(ours.named_buffers())[n].cuda()) for n, b in inv):
            print("inv_freq differs:", [(str(b.device), str(b.dtype)) for _, b in inv], file=sys.stderr)
        print(name, "logits equal", torch.equal(a, b), "tensors equal", len(same) == len(theirs.state_dict()),
              "tied", ours.lm_head.weight is ours.model.embed_tokens.weight,
              "eval", not ours.training, "device", ours.device, "no copy", took < weights / 10,
              "generation_config", ours.generation_config is not None)
        del ours, theirs


def net_save(mnt):
    net = am.make(seed=9, d=1024, layers=8).cuda()
    vyrefs.torch.save(net, os.path.join(mnt, "net"), max_shard_size="40MB")
    print(len(os.listdir(os.path.join(mnt, "net"))), am.digest(net(am.ids().cuda())))


def attached():
    with vyrefs.torch.empty_weights():
        net = am.Net(d=1024, layers=8).eval()
    return net


def net_hold(mnt, flags):
    net = attached()
    vyrefs.torch.attach(net, os.path.join(mnt, "net"))
    with torch.no_grad():
        out = am.digest(net(am.ids().cuda()))
    torch.cuda.synchronize()
    print(out, flush=True)
    open(os.path.join(flags, "ready"), "w").close()
    for _ in range(1200):  # until the suite says done (at most 2 minutes)
        if os.path.exists(os.path.join(flags, "done")):
            break
        time.sleep(0.1)


def net_second(mnt):
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the context and the allocator's first block, before the count
    torch.cuda.synchronize()
    free0, _ = torch.cuda.mem_get_info()
    net = attached()
    vyrefs.torch.attach(net, os.path.join(mnt, "net"))
    torch.cuda.synchronize()
    free1, _ = torch.cuda.mem_get_info()
    weights = sum(p.numel() * p.element_size() for p in net.parameters())
    with torch.no_grad():
        out = am.digest(net(am.ids().cuda()))
    print(out)
    print("weights MiB", weights // MiB, "taken MiB", (free0 - free1) // MiB, "under a tenth", free0 - free1 < weights / 10)


def processed(mnt):
    net = am.make(seed=4, d=256, layers=2).cuda()
    sd = net.state_dict()
    proc = {"up_t": sd["blocks.0.up.weight"].t(), "scaled": sd["blocks.1.down.weight"] * 0.125,
            "half": sd["emb.weight"].to(torch.bfloat16), "steps": sd["steps"]}
    vyrefs.torch.save(proc, os.path.join(mnt, "proc"), max_shard_size="200KB")
    back = vyrefs.torch.load_state_dict(os.path.join(mnt, "proc"))
    print(len(back.files) > 1, sorted(back) == sorted(proc),
          all(back[k].is_cuda and torch.equal(back[k], v) for k, v in proc.items()))
    # Too big for the device: a conversion that needs more than is free
    # (mem_get_info made to say 64 KiB) is refused before anything changes.
    vyrefs.torch.save(net, os.path.join(mnt, "net256"))
    with vyrefs.torch.empty_weights():
        net2 = am.Net(d=256, layers=2)
    mapped = lambda: open(os.path.join(mnt, ".vyre/stats")).read().split("mapped_bytes ")[1].split()[0]  # noqa: E731
    before, real = mapped(), torch.cuda.mem_get_info
    torch.cuda.mem_get_info = lambda dev=None: (64 << 10, real(dev)[1])
    try:
        vyrefs.torch.attach(net2, os.path.join(mnt, "net256"), dtype=torch.float16)
    except MemoryError as e:
        print(str(e).split(" bytes")[0], "(Fix:" in str(e))
    torch.cuda.mem_get_info = real
    print(net2.emb.weight.device, mapped() == before)


def dlpack(mnt):
    vyrefs.torch.save({"w": torch.arange(4096, dtype=torch.float32, device="cuda").reshape(64, 64),
                       "b": torch.ones(64, dtype=torch.bfloat16, device="cuda")}, os.path.join(mnt, "d"))
    sd = vyrefs.torch.load_state_dict(os.path.join(mnt, "d"))
    try:
        import cupy
        c = cupy.from_dlpack(sd["w"])
        print("cupy", c.data.ptr == sd["w"].data_ptr(), float(c.sum()))
        try:
            cupy.from_dlpack(sd["b"])
            print("cupy bf16 taken")
        except Exception as e:
            print("cupy bf16 refused:", type(e).__name__)
    except ImportError:
        print("cupy not installed")
    try:
        import jax.dlpack
        j = jax.dlpack.from_dlpack(sd["w"])
        print("jax", j.unsafe_buffer_pointer() == sd["w"].data_ptr(), float(j.sum()))
    except ImportError:
        print("jax not installed")
    except Exception as e:  # a jax without CUDA
        print("jax refused:", type(e).__name__, str(e)[:200])


def tiny_llama_config():
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                       num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
                       tie_word_embeddings=False)


def pad_header_to_8_mod_16(path):
    """Rewrite a safetensors file with its header padded (spaces, as the
    format allows) so its data starts at 8 mod 16: the case the mount must
    place. Returns where the data starts."""
    import struct
    with open(path, "rb") as f:
        raw = f.read()
    n, = struct.unpack("<Q", raw[:8])
    text, data = raw[8:8 + n], raw[8 + n:]
    while (8 + len(text)) % 16 != 8:
        text += b" "
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    return 8 + len(text)


def random_tiny_llama():
    """The TinyLlama shape, bf16, random weights made on the GPU (no
    initialisation pass)."""
    from transformers import LlamaForCausalLM
    return random_model(LlamaForCausalLM, tiny_llama_config())


def random_model(cls, config):
    """Model `cls` of `config`, bf16, random weights made on the GPU."""
    with vyrefs.torch.empty_weights():
        model = cls(config).to(torch.bfloat16)
    g = torch.Generator(device="cuda").manual_seed(5)
    for mod in model.modules():
        for key, p in list(mod._parameters.items()):
            if p is not None:
                t = torch.empty(p.shape, dtype=p.dtype, device="cuda")
                t.normal_(0, 0.02, generator=g) if t.dim() > 1 else t.fill_(1.0)
                mod._parameters[key] = torch.nn.Parameter(t, requires_grad=False)
    if getattr(config, "tie_word_embeddings", False) and hasattr(model, "tie_weights"):
        model.tie_weights()  # the filled-in parameters are two tensors until tied again
    return model


def exact_save(tmp):
    model = random_tiny_llama()
    model.save_pretrained(os.path.join(tmp, "tl"), max_shard_size="500MB")
    starts = [pad_header_to_8_mod_16(os.path.join(tmp, "tl", f))
              for f in sorted(os.listdir(os.path.join(tmp, "tl"))) if f.endswith(".safetensors")]
    print("shards", len(starts) > 1, "data at 8 mod 16", all(s % 16 == 8 for s in starts))


def exact_compare(mnt, tmp):
    compare_loads(os.path.join(mnt, "tl"), os.path.join(tmp, "tl"), 32000, 512, 16)


def compare_loads(ours_dir, theirs_dir, vocab, align, new_tokens):
    """vyrefs.transformers' attach of ours_dir against transformers' own
    load of theirs_dir: the parameters off `align` bytes, the logits and
    `new_tokens` greedy tokens."""
    import transformers
    torch.cuda.init()
    ours = vyrefs.transformers.from_pretrained(ours_dir, dtype=torch.bfloat16)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        theirs_dir, device_map="cuda", **{dtype_kw(transformers): torch.bfloat16})
    off = [n for n, p in ours.named_parameters() if p.data_ptr() % align]
    ids = torch.randint(0, vocab, (4, 128), generator=torch.Generator().manual_seed(7)).cuda()
    with torch.no_grad():
        a, b = ours(ids).logits, theirs(ids).logits
        gen = dict(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
        ga, gb = ours.generate(ids[:1, :32], **gen), theirs.generate(ids[:1, :32], **gen)
    print("parameters off %d" % align, len(off), off[:3])
    print("logits equal", torch.equal(a, b), "max diff", float((a.float() - b.float()).abs().max()))
    print("greedy equal", torch.equal(ga, gb))


def saved_into(mnt):
    """Issue 67: save_pretrained's own writer straight into the mount (the
    order it writes a file's bytes in is its own: the mount places the
    file whatever it is), then the attached model against transformers'
    own load of the same files."""
    import vyrefs.safetensors as st
    from transformers import Qwen2Config, Qwen2ForCausalLM
    config = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=4,
                         num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=2048,
                         tie_word_embeddings=True)
    where = os.path.join(mnt, "qwen")
    random_model(Qwen2ForCausalLM, config).save_pretrained(where, max_shard_size="200MB")
    torch.cuda.synchronize()
    shards = sorted(f for f in os.listdir(where) if f.endswith(".safetensors"))
    placed, misaligned = len(shards) > 1, 0
    for f in shards:
        start, entries, _ = st.read_header(os.path.join(where, f))
        with vyrefs.map(os.path.join(where, f)) as m:
            placed = placed and (m.ptr + start) % 4096 == 0
            misaligned += st.misaligned(m, start, entries)[0]
    print("shards placed", placed, "misaligned", misaligned)
    compare_loads(where, where, 151936, 256, 32)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"llama-save": llama_save, "llama-compare": llama_compare, "net-save": net_save, "net-hold": net_hold,
     "net-second": net_second, "processed": processed, "dlpack": dlpack, "exact-save": exact_save,
     "exact-compare": exact_compare, "saved-into": saved_into}[cmd](*args)
