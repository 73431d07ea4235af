"""A converted model (issue "families"): its first attach, which makes the
converted copy, and every later one, against transformers' own load of the
same directory on the same GPU (bench/run.sh phase `families`, opt-in).

  [FAMILIES_SIZE=large] python3 bench/families_bench.py MOUNT TMPFS [REPS]

(large: about 1 GB a family, tests/gpu/families_check.py)

The families transformers converts at load (tests/gpu/families_check.py:
qwen3_moe and mixtral fuse their experts, t5 keeps modules in fp32), random
and small, saved into TMPFS and copied into MOUNT with `vyrefs cp -r`. Each
rep is a fresh process per family (imports and the CUDA context are not
timed, nor one untimed load of the family that takes the process's
one-time costs) that measures, in turn:
  hf     transformers' from_pretrained(TMPFS/NAME, device_map="cuda")
  first  vyrefs.transformers.from_pretrained(MOUNT/NAME) with no converted
         copy there (it makes it)
(in the other order every second rep, so neither always pays the
process's first load), then
  later  the same once the copy exists, with vyrefs' own share of it
         (load_state_dict and attach, as bench/attach_bench.py counts it).
Printed, `key value` lines (medians; ratios as the median of per-rep
ratios with their quartiles):
  families.NAME.hf_ms / first_ms / later_ms / later_own_ms
  families.NAME.first_over_hf   target <= 1.1
  families.NAME.later_over_hf
  families.NAME.each     every process's four figures, in ms
FAMILIES_PROFILE=DIR: after the timed runs, a later and then a first
attach run again under cProfile, their 30 costliest calls (cumulative) in
DIR/NAME.PID.later.txt and .first.txt.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "gpu"))
CONVERTED = ("qwen3_moe", "mixtral", "t5")


def one(mnt, tmp, name, hf_first):
    """In a fresh process: the three loads of one family, as JSON."""
    import torch
    import transformers
    import families_check as fc
    import vyrefs.torch
    import vyrefs.transformers
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    config, cls, _ = fc.configs()[name]
    kw = {fc.dtype_kw(transformers): torch.bfloat16}
    out = {}

    def hf():
        t = time.perf_counter()
        getattr(transformers, cls).from_pretrained(os.path.join(tmp, name), device_map="cuda", **kw)
        torch.cuda.synchronize()
        out["hf_ms"] = (time.perf_counter() - t) * 1e3

    def first():
        shutil.rmtree(os.path.join(mnt, name, "vyrefs-converted"), ignore_errors=True)
        t = time.perf_counter()
        m = vyrefs.transformers.from_pretrained(os.path.join(mnt, name), dtype=torch.bfloat16)
        torch.cuda.synchronize()
        out["first_ms"] = (time.perf_counter() - t) * 1e3
        out["converted"] = bool(m.vyrefs_converted)

    # One load untimed first: the process's one-time costs (transformers'
    # model code, the allocator's first blocks) go to neither measure.
    getattr(transformers, cls).from_pretrained(os.path.join(tmp, name), device_map="cuda", **kw)
    torch.cuda.synchronize()
    for f in ((hf, first) if hf_first else (first, hf)):
        f()
    own = [0.0]

    def timed(f):
        def g(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                own[0] += time.perf_counter() - t
        return g

    vyrefs.torch.load_state_dict = timed(vyrefs.torch.load_state_dict)
    vyrefs.torch.attach = timed(vyrefs.torch.attach)
    t = time.perf_counter()
    vyrefs.transformers.from_pretrained(os.path.join(mnt, name), dtype=torch.bfloat16)
    torch.cuda.synchronize()
    out["later_ms"] = (time.perf_counter() - t) * 1e3
    out["later_own_ms"] = own[0] * 1e3
    if os.environ.get("FAMILIES_PROFILE"):
        where = os.path.join(os.environ["FAMILIES_PROFILE"], "%s.%d" % (name, os.getpid()))
        profile(where + ".later.txt",
                lambda: vyrefs.transformers.from_pretrained(os.path.join(mnt, name), dtype=torch.bfloat16))
        shutil.rmtree(os.path.join(mnt, name, "vyrefs-converted"), ignore_errors=True)
        profile(where + ".first.txt",
                lambda: vyrefs.transformers.from_pretrained(os.path.join(mnt, name), dtype=torch.bfloat16))
    print(json.dumps(out), flush=True)


def profile(path, f):
    """f() under cProfile (after the timed runs: it times nothing), its
    30 costliest calls by cumulative time into path."""
    import cProfile
    import io
    import pstats
    pr = cProfile.Profile()
    pr.enable()
    f()
    pr.disable()
    text = io.StringIO()
    pstats.Stats(pr, stream=text).sort_stats("cumulative").print_stats(30)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as out:
        out.write(text.getvalue())


def quartiles(xs):
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


def main(mnt, tmp, reps=5):
    import families_check as fc
    for name in CONVERTED:
        fc.save(tmp, only=name)
        vy = os.environ.get("VYREFS", os.path.join(HERE, "..", "build", "vyrefs"))
        subprocess.run([vy, "cp", "-r", os.path.join(tmp, name), mnt + "/"], check=True)
        runs = []
        for r in range(int(reps)):
            got = subprocess.run([sys.executable, __file__, "one", mnt, tmp, name, str(r % 2)],
                                 check=True, capture_output=True, text=True)
            runs.append(json.loads(got.stdout.strip().splitlines()[-1]))
        print("families.%s.each %s" % (name, " ".join("hf %.1f first %.1f later %.1f own %.1f" % (
            x["hf_ms"], x["first_ms"], x["later_ms"], x["later_own_ms"]) for x in runs)))
        if not all(x["converted"] for x in runs):
            print("families.%s.converted 0" % name)
        for key in ("hf_ms", "first_ms", "later_ms", "later_own_ms"):
            print("families.%s.%s %.1f" % (name, key, statistics.median(x[key] for x in runs)))
        for key, num in (("first_over_hf", "first_ms"), ("later_over_hf", "later_ms")):
            ratios = [x[num] / x["hf_ms"] for x in runs]
            lo, hi = quartiles(ratios)
            print("families.%s.%s %.3f (quartiles %.3f-%.3f, %d reps)" % (name, key, statistics.median(ratios), lo, hi,
                                                                           len(ratios)))
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1] == "one":
        one(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "0")
    else:
        main(*sys.argv[1:])
