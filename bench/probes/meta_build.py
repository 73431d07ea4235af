"""Where building a 7B-shaped Llama with no parameter memory spends its
time: vyrefs.torch.empty_weights, torch's meta device, accelerate's
init_empty_weights (include_buffers=False). Run on the GPU machine:
python3 bench/probes/meta_build.py"""
import cProfile, pstats, sys, time
sys.path.insert(0, "client/python")
import torch, transformers
import vyrefs.torch

cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                               num_attention_heads=32, num_key_value_heads=32, torch_dtype="bfloat16")
cls = transformers.LlamaForCausalLM


def build(ctx):
    t = time.perf_counter()
    with ctx():
        m = cls._from_config(cfg, torch_dtype=torch.bfloat16)
    return (time.perf_counter() - t) * 1e3, m


for name, ctx in (("vyrefs.empty_weights", vyrefs.torch.empty_weights), ("torch meta", lambda: torch.device("meta"))):
    ms, m = build(ctx)
    print("%-22s %8.1f ms  params on %s" % (name, ms, next(m.parameters()).device))
try:
    import accelerate
    ms, m = build(lambda: accelerate.init_empty_weights(include_buffers=False))
    print("%-22s %8.1f ms" % ("accelerate", ms))
except ImportError:
    print("no accelerate")
pr = cProfile.Profile()
pr.enable()
build(vyrefs.torch.empty_weights)
pr.disable()
pstats.Stats(pr).sort_stats("cumulative").print_stats(18)
