"""The model side of gpu_attach_test.sh's families test (issue "families"):
random small models of each family, saved by save_pretrained, then each
attached from the mount with vyrefs.transformers.from_pretrained and
compared with transformers' own from_pretrained of the same directory on
the same GPU.

  families_check.py save TMP            every family into TMP/NAME
  families_check.py compare MNT TMP     one line a family:
      NAME converted C logits equal L greedy equal G
  families_check.py later MNT           in a new process, each converted
      family once more (its copy made): NAME converted C weights W taken T
      (device memory the attach took through torch's allocator, bytes)
  families_check.py stale MNT TMP       qwen3_moe saved again (another
      seed) into TMP, its shards copied over the mount's: remade R equal L

llama_fp8 is llama quantized by transformers' fine-grained FP8 (float8
weights with their 128x128 block scales), saved: it attaches with its
stored tensors as they are; its line says whether every tensor equals
transformers' own load's, and its logits where this machine runs FP8
(transformers' FP8 forward needs the `kernels` package: where both loads'
forwards fail for it, the logits are n/a and the reason goes to stderr).

Timings go to stderr (first attach, transformers' own load, a later
attach in the same process).
"""
import os
import sys
import time

import torch

import vyrefs.transformers


def dtype_kw(transformers):
    return "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"


# FAMILIES_SIZE=large (bench/families_bench.py): the converted families at
# about 1 GB each, where bytes, not per-call costs, decide.
LARGE = os.environ.get("FAMILIES_SIZE") == "large"


def configs():
    import transformers as t
    small = dict(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=256)
    experts = dict(qwen=8, moe=64, mixtral=4)
    t5 = dict(vocab_size=1000, d_model=128, d_ff=256, d_kv=32, num_layers=2, num_heads=4)
    if LARGE:
        small = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                     num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048)
        experts = dict(qwen=32, moe=512, mixtral=8)
        t5 = dict(vocab_size=32000, d_model=1024, d_ff=4096, d_kv=64, num_layers=12, num_heads=16)
    out = {
        "llama": (t.LlamaConfig(**small), "LlamaForCausalLM", torch.bfloat16),
        "qwen2_tied": (t.Qwen2Config(tie_word_embeddings=True, **small), "Qwen2ForCausalLM", torch.bfloat16),
        "qwen3_moe": (t.Qwen3MoeConfig(num_experts=experts["qwen"], num_experts_per_tok=2,
                                       moe_intermediate_size=experts["moe"], decoder_sparse_step=1,
                                       head_dim=small["hidden_size"] // small["num_attention_heads"], **small),
                      "Qwen3MoeForCausalLM", torch.bfloat16),
        "mixtral": (t.MixtralConfig(num_local_experts=experts["mixtral"], num_experts_per_tok=2, **small),
                    "MixtralForCausalLM", torch.bfloat16),
        "t5": (t.T5Config(decoder_start_token_id=0, **t5), "T5ForConditionalGeneration", torch.float32),
        "bert": (t.BertConfig(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                              num_attention_heads=4), "BertModel", torch.bfloat16),
        "llava": (t.LlavaConfig(vision_config=t.CLIPVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                                   num_attention_heads=4, image_size=32, patch_size=8),
                                text_config=t.LlamaConfig(**small), image_token_index=999),
                  "LlavaForConditionalGeneration", torch.bfloat16),
    }
    return out


def save(tmp, seed=11, only=None):
    import transformers
    for name, (config, cls, dtype) in configs().items():
        if only and name != only:
            continue
        torch.manual_seed(seed)
        model = getattr(transformers, cls)(config).to(dtype)
        model.save_pretrained(os.path.join(tmp, name), max_shard_size="500MB" if LARGE else "200KB")
    if not only or only == "llama_fp8":
        fp8 = transformers.FineGrainedFP8Config(weight_block_size=[128, 128])
        model = transformers.LlamaForCausalLM.from_pretrained(os.path.join(tmp, "llama"), device_map="cuda",
                                                              quantization_config=fp8)
        # One file: safetensors' writer lists its float32 scales before the
        # bfloat16 tensors, so the files' order cannot give the model's dtype.
        model.save_pretrained(os.path.join(tmp, "llama_fp8"), max_shard_size="2GB")


def _run(model, name, ids):
    with torch.no_grad():
        if name == "t5":
            return model(input_ids=ids, decoder_input_ids=ids[:, :8]).logits
        if name == "bert":
            return model(input_ids=ids).last_hidden_state
        return model(input_ids=ids).logits


def _greedy(model, name, ids):
    if name == "bert":
        return None
    with torch.no_grad():
        return model.generate(input_ids=ids[:1, :16], max_new_tokens=32, do_sample=False, pad_token_id=0)


def compare_one(mnt, tmp, name):
    import transformers
    config, cls, _ = configs()[name]
    kw = {dtype_kw(transformers): torch.bfloat16}
    t0 = time.perf_counter()
    ours = vyrefs.transformers.from_pretrained(os.path.join(mnt, name), dtype=torch.bfloat16)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = getattr(transformers, cls).from_pretrained(os.path.join(tmp, name), device_map="cuda", **kw).eval()
    own = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = vyrefs.transformers.from_pretrained(os.path.join(mnt, name), dtype=torch.bfloat16)
    later = time.perf_counter() - t0
    ids = torch.randint(1, 990, (2, 24), generator=torch.Generator().manual_seed(3)).cuda()
    a, b, c = _run(ours, name, ids), _run(theirs, name, ids), _run(again, name, ids)
    ga, gb = _greedy(ours, name, ids), _greedy(theirs, name, ids)
    greedy = "n/a" if ga is None else torch.equal(ga, gb)
    conv = "yes" if ours.vyrefs_converted else "no"
    sys.stderr.write("%s: first attach %.3f s, transformers' own %.3f s, a later attach %.3f s; max diff %g\n"
                     % (name, first, own, later, float((a.float() - b.float()).abs().max())))
    return "%s converted %s logits equal %s greedy equal %s" % (name, conv, torch.equal(a, b) and torch.equal(a, c),
                                                              greedy)


def _bytes(t):
    return t.view(torch.uint8) if t.element_size() == 1 and t.is_floating_point() else t


def _forward(model, ids):
    try:
        return _run(model, "llama", ids), _greedy(model, "llama", ids)
    except ImportError as e:  # transformers' FP8 forward without `kernels`
        return str(e), None


def compare_quantized(mnt, tmp, name="llama_fp8"):
    import transformers
    ours = vyrefs.transformers.from_pretrained(os.path.join(mnt, name))
    theirs = transformers.LlamaForCausalLM.from_pretrained(os.path.join(tmp, name), device_map="cuda").eval()
    a, b = ours.state_dict(), theirs.state_dict()
    same = (sorted(a) == sorted(b) and all(a[k].dtype == b[k].dtype and torch.equal(_bytes(a[k]), _bytes(b[k]))
                                           for k in a)
            and all(type(m) is type(theirs.get_submodule(n)) for n, m in ours.named_modules()))
    kinds = sorted({str(t.dtype) for t in a.values()})
    ids = torch.randint(1, 990, (2, 24), generator=torch.Generator().manual_seed(3)).cuda()
    (la, ga), (lb, gb) = _forward(ours, ids), _forward(theirs, ids)
    if isinstance(la, str) or isinstance(lb, str):
        sys.stderr.write("%s: forward: ours %s; transformers' own %s\n" % (name, str(la)[:200], str(lb)[:200]))
        logits = greedy = "n/a" if isinstance(la, str) and la == lb else False
    else:
        logits, greedy = torch.equal(la, lb), torch.equal(ga, gb)
    return "%s converted %s copied %d tensors equal %s (%s) logits equal %s greedy equal %s" % (
        name, "yes" if ours.vyrefs_converted else "no", ours.vyrefs_copied_bytes, same, " ".join(kinds), logits,
        greedy)


def compare(mnt, tmp):
    for name in list(configs()) + ["llama_fp8"]:
        try:
            print((compare_quantized if name == "llama_fp8" else compare_one)(mnt, tmp, name), flush=True)
        except Exception as e:  # one line a family, whatever happens
            print("%s failed %s: %s" % (name, type(e).__name__, str(e)[:300]), flush=True)


def later(mnt):
    """A second process's attach of a converted model: its copy mapped,
    no weight allocated (only the buffers no file holds)."""
    torch.zeros(1, device="cuda")  # the context and the allocator's first block, before the count
    torch.cuda.synchronize()
    for name in ("qwen3_moe", "mixtral", "t5"):
        before = torch.cuda.memory_allocated()
        model = vyrefs.transformers.from_pretrained(os.path.join(mnt, name), dtype=torch.bfloat16)
        torch.cuda.synchronize()
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        print(name, "converted", "yes" if model.vyrefs_converted else "no", "weights", weights, "taken",
              torch.cuda.memory_allocated() - before, flush=True)
        del model


def stale(mnt, tmp):
    import shutil
    record = os.path.join(mnt, "qwen3_moe", "vyrefs-converted", "vyrefs-converted.json")
    before = os.stat(record).st_mtime_ns
    shutil.rmtree(os.path.join(tmp, "qwen3_moe"))
    save(tmp, seed=12, only="qwen3_moe")
    for f in sorted(os.listdir(os.path.join(tmp, "qwen3_moe"))):
        if f.endswith(".safetensors"):
            shutil.copyfile(os.path.join(tmp, "qwen3_moe", f), os.path.join(mnt, "qwen3_moe", f))
    line = compare_one(mnt, tmp, "qwen3_moe")
    print("remade", os.stat(record).st_mtime_ns != before, line.split(" converted ")[1])


if __name__ == "__main__":
    {"save": save, "compare": compare, "later": later, "stale": stale}[sys.argv[1]](*sys.argv[2:])
