"""A model attached from the mount against the same model loaded by
transformers, on the same GPU, in the same process (bench/run.sh, phase
`exact`; opt-in: BENCH_PHASES=exact).

  python3 bench/exact_bench.py MOUNT TMPFS SHAPE [ROUNDS]

SHAPE is 1b (TinyLlama's: 2048 wide, 22 layers, 500 MB shards), 7b
(Llama 2 7B's: 4096 wide, 32 layers, 2 GB shards) or tied1b (1b with tied
embeddings). Random bf16 weights are made on the GPU (no download) and
saved with save_pretrained into TMPFS as a user's would be: their headers
end wherever the writer put them. The directory is copied into the mount
with `vyrefs cp -r`. transformers loads it from TMPFS (device_map="cuda");
vyrefs.transformers.from_pretrained attaches it from the mount.

Each timed figure is ROUNDS (default 7) rounds in which the two models take
turns going first; a round times PASSES passes of each, after 3 warm-ups
(cuda events around the passes, ms per pass). It prints, one `key value` a
line (SHAPE.KEY):
  off512                parameters of the attached model not 512-byte aligned
  logits_equal          1 when the 8x512 logits are torch.equal
  greedy_equal          1 when 64 greedy tokens are the same
  fwd_BxT.ratio         the median of the rounds' attached/transformers ratios
  fwd_BxT.q1, .q3       their quartiles
  fwd_BxT.hf_ms, .vy_ms the medians of each side's ms per pass
  gen128.*              the same for a 128-token greedy generate (ms per call)
"""
import os
import statistics
import subprocess
import sys

import torch

SHAPES = {
    "1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
               num_key_value_heads=4, tie_word_embeddings=False, shard="500MB"),
    "tied1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                   num_key_value_heads=4, tie_word_embeddings=True, shard="500MB"),
    "7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=32, tie_word_embeddings=False, shard="2GB"),
}
BATCHES = [(1, 1, 30), (8, 512, 10), (32, 2048, 2)]  # batch, tokens, passes a round


def dtype_kw():
    import transformers
    return "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"


def make(shape, where):
    from transformers import LlamaConfig, LlamaForCausalLM
    import vyrefs.torch
    kw = dict(SHAPES[shape])
    shard = kw.pop("shard")
    cfg = LlamaConfig(vocab_size=32000, max_position_embeddings=4096, **kw)
    with vyrefs.torch.empty_weights():
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    g = torch.Generator(device="cuda").manual_seed(0)
    for mod in model.modules():
        for key, p in list(mod._parameters.items()):
            if p is not None:
                t = torch.empty(p.shape, dtype=torch.bfloat16, device="cuda")
                t.normal_(0, 0.02, generator=g) if t.dim() > 1 else t.fill_(1.0)
                mod._parameters[key] = torch.nn.Parameter(t, requires_grad=False)
    if cfg.tie_word_embeddings:
        model.tie_weights()
    model.save_pretrained(where, max_shard_size=shard)
    del model
    torch.cuda.empty_cache()


def quartiles(xs):
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], statistics.median(xs), q[2]


def timed(f, passes):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    a.record()
    for _ in range(passes):
        f()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / passes


def compare(name, fs, rounds, passes, put):
    """fs: {"hf": f, "vy": f}; rounds alternate which goes first."""
    for f in fs.values():
        for _ in range(3):
            f()
    ms = {"hf": [], "vy": []}
    for r in range(rounds):
        for k in (("hf", "vy") if r % 2 == 0 else ("vy", "hf")):
            ms[k].append(timed(fs[k], passes))
    ratios = [v / h for v, h in zip(ms["vy"], ms["hf"])]
    q1, med, q3 = quartiles(ratios)
    put(name + ".ratio", med)
    put(name + ".q1", q1)
    put(name + ".q3", q3)
    put(name + ".hf_ms", statistics.median(ms["hf"]))
    put(name + ".vy_ms", statistics.median(ms["vy"]))


def main(mnt, tmp, shape, rounds):
    import transformers
    import vyrefs.transformers
    src = os.path.join(tmp, "exact-" + shape)
    make(shape, src)
    subprocess.run([os.environ.get("VYREFS_BIN", "vyrefs"), "cp", "-r", src, mnt + "/"], check=True)

    def put(k, v):
        print("%s.%s %.4f" % (shape, k, v), flush=True)

    hf = transformers.AutoModelForCausalLM.from_pretrained(src, device_map="cuda", **{dtype_kw(): torch.bfloat16})
    vy = vyrefs.transformers.from_pretrained(os.path.join(mnt, os.path.basename(src)), dtype=torch.bfloat16)
    hf.eval()
    put("off512", sum(1 for p in vy.parameters() if p.data_ptr() % 512))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        x = torch.randint(0, 32000, (8, 512), generator=gen).cuda()
        put("logits_equal", float(torch.equal(hf(x).logits, vy(x).logits)))
        p = torch.randint(0, 32000, (1, 32), generator=gen).cuda()
        kw = dict(do_sample=False, pad_token_id=0)
        put("greedy_equal", float(torch.equal(hf.generate(p, max_new_tokens=64, **kw),
                                              vy.generate(p, max_new_tokens=64, **kw))))
        for b, t, passes in BATCHES:
            x = torch.randint(0, 32000, (b, t), generator=gen).cuda()
            compare("fwd_%dx%d" % (b, t), {"hf": lambda: hf(x, logits_to_keep=0),
                                           "vy": lambda: vy(x, logits_to_keep=0)}, rounds, passes, put)
        kw["min_new_tokens"] = 128
        compare("gen128", {"hf": lambda: hf.generate(p, max_new_tokens=128, **kw),
                           "vy": lambda: vy.generate(p, max_new_tokens=128, **kw)}, rounds, 1, put)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 7)
