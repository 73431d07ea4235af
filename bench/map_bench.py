"""Mapping against reading, on the GPU machine (bench/run.sh, phase `map`).

  python3 bench/map_bench.py MOUNT TMPFS

Prints `key value` lines:
  map.read_cuda_4g_s     a 4 GiB file of the mount into a CUDA tensor the way
                         people do today: readinto a pinned buffer, .cuda()
  map.map_4g_ms          the same through vyrefs.map + torch.as_tensor
  map.map_<size>_ms      the map's time for files of 1 MiB .. 16 GiB
  map.st_tmpfs_ms        safetensors.torch.load_file(device="cuda") of a
                         2 GiB file from tmpfs
  map.st_mount_ms        the same from the mount
  map.st_map_ms          the same tensors through vyrefs.safetensors.load, zero copy
"""
import os, sys, time

import torch
import vyrefs

mnt, tmp = sys.argv[1], sys.argv[2]
GiB = 1 << 30


def ms(f, reps=5):
    best = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        best.append((time.perf_counter() - t0) * 1e3)
    best.sort()
    return best[len(best) // 2]


def put(k, v):
    print("%s %.3f" % (k, v), flush=True)


def make(path, size):
    with open(path, "wb") as f:
        f.truncate(size)  # reads as zeros; its bytes are on the device


# 4 GiB into a CUDA tensor: read() into pinned memory, then .cuda()
path = mnt + "/big4g"
os.system("head -c %d /dev/urandom > %s/src4g && cp %s/src4g %s" % (4 * GiB, tmp, tmp, path))
pinned = torch.empty(4 * GiB, dtype=torch.uint8).pin_memory()


def read_cuda():
    os.system("echo 1 > /proc/sys/vm/drop_caches")
    with open(path, "rb", buffering=0) as f:
        view = memoryview(pinned.numpy())
        got = 0
        while got < 4 * GiB:
            n = f.readinto(view[got:])
            if not n:
                break
            got += n
    return pinned.cuda()


put("map.read_cuda_4g_s", ms(read_cuda, reps=3) / 1e3)
del pinned


def map_tensor(p):
    m = vyrefs.map(p)
    t = torch.as_tensor(m, device="cuda")
    assert t.data_ptr() == m.ptr
    del t
    m.close()


put("map.map_4g_ms", ms(lambda: map_tensor(path)))
os.remove(path)
os.remove(tmp + "/src4g")
for size, name in ((1 << 20, "1m"), (64 << 20, "64m"), (1 * GiB, "1g"), (4 * GiB, "4g"), (16 * GiB, "16g")):
    p = mnt + "/sz" + name
    make(p, size)
    put("map.map_%s_ms" % name, ms(lambda: map_tensor(p)))
    os.remove(p)

# safetensors: 2 GiB of tensors
try:
    from safetensors.torch import save_file, load_file
except ImportError:
    sys.exit(0)
tensors = {"w%d" % i: torch.randn(64 << 20 if i < 7 else (64 << 20) + 3, dtype=torch.float32 if i % 2 else torch.float16)
           for i in range(9)}
tensors = {k: v for k, v in tensors.items()}
save_file(tensors, tmp + "/model.safetensors")
os.system("cp %s/model.safetensors %s/model.safetensors" % (tmp, mnt))
put("map.st_tmpfs_ms", ms(lambda: load_file(tmp + "/model.safetensors", device="cuda"), reps=3))
put("map.st_mount_ms", ms(lambda: load_file(mnt + "/model.safetensors", device="cuda"), reps=3))

def load_mapped():
    d = vyrefs.safetensors.load(mnt + "/model.safetensors")  # zero-copy views; the mapping goes with them
    del d


put("map.st_map_ms", ms(load_mapped, reps=3))
d = vyrefs.safetensors.load(mnt + "/model.safetensors")
ref = load_file(tmp + "/model.safetensors", device="cuda")
put("map.st_map_exact", float(all(torch.equal(d[k], ref[k]) for k in ref)))
del d
os.remove(mnt + "/model.safetensors")
os.remove(tmp + "/model.safetensors")
