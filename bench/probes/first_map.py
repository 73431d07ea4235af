"""Where a new process's first load_state_dict of a file spends its time
(issue "gpus": a rank's restart maps its files first): loading
libvyrefs.so, the header's read, vy_map (the daemon's MAP and the
driver's import and map), the tensor views; then the same again in that
process. Run on the GPU machine over a cuda mount:

  python3 bench/probes/first_map.py MNT [GB] [PROCESSES]

writes MNT/first-map/model.safetensors (GB, default 3.25: a 7B rank's
shard; 291 tensors) once, then runs PROCESSES (default 7) new processes
and prints each part's median and quartiles (ms)."""
import os
import statistics
import subprocess
import sys
import time


def make(path, gb):
    import torch
    import vyrefs.torch
    n = 291
    each = int(gb * 2 ** 30) // n // 2 // 4096 * 4096
    tensors = {"t%03d" % k: torch.zeros(each, dtype=torch.bfloat16, device="cuda") for k in range(n)}
    vyrefs.torch.save(tensors, os.path.dirname(path), max_shard_size="100GB")


def measure(path):
    import torch
    torch.zeros(1, device="cuda")  # the context, before any clock
    import vyrefs
    import vyrefs.safetensors as st
    out = []
    t = time.perf_counter()
    vyrefs._library()
    out.append(("library", time.perf_counter() - t))
    for turn in ("first", "again"):
        t = time.perf_counter()
        start, entries, _ = st.read_header(path)
        out.append((turn + "_header", time.perf_counter() - t))
        t = time.perf_counter()
        m = vyrefs.map(path)
        out.append((turn + "_vy_map", time.perf_counter() - t))
        t = time.perf_counter()
        views = st.views(path, m, start, entries)
        out.append((turn + "_views", time.perf_counter() - t))
        del views
        m.close()
    print(" ".join("%s=%.3f" % (k, v * 1000) for k, v in out))


def main(mnt, gb="3.25", procs="7"):
    path = os.path.join(mnt, "first-map", "model.safetensors")
    if not os.path.exists(path):
        make(path, float(gb))
    parts = {}
    for _ in range(int(procs)):
        line = subprocess.run([sys.executable, __file__, "--measure", path], check=True, capture_output=True,
                              text=True).stdout.split()
        for kv in line:
            k, v = kv.split("=")
            parts.setdefault(k, []).append(float(v))
    for k, v in parts.items():
        q = statistics.quantiles(v, n=4) if len(v) > 1 else v * 3
        print("first_map.%s_ms %.2f [%.2f, %.2f]" % (k, q[1], q[0], q[2]))


if __name__ == "__main__":
    if sys.argv[1] == "--measure":
        measure(sys.argv[2])
    else:
        main(*sys.argv[1:])
