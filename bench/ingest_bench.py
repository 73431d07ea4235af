"""Files into and out of the mount (bench/run.sh, phase `ingest`), each
beside its baseline, measured in the same run:

  python3 bench/ingest_bench.py VYREFS MOUNT TMPFS [BYTES]   (BYTES: 4 GiB)

  ingest.read_T_gbps     T threads read the 4 GiB source into memory
  ingest.in_T_gbps       vyrefs cp --threads=T of it into the mount
  ingest.in_default_gbps vyrefs cp with its default thread count (ingest.threads)
  ingest.cp_in_gbps      coreutils cp into the mount (through FUSE)
  ingest.write_T_gbps    T threads write 4 GiB into tmpfs from memory
  ingest.out_T_gbps      vyrefs cp --threads=T out of the mount into tmpfs
  ingest.st_save_*_ms    safetensors of 2 GiB of CUDA tensors: save_file to
                         tmpfs, vyrefs.safetensors.save into the mount
  ingest.st_load_*_ms    load_file(device="cuda") from tmpfs; vyrefs load
"""
import os, subprocess, sys, threading, time

vy, mnt, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
SIZE = int(sys.argv[4]) if len(sys.argv) > 4 else 4 << 30
CHUNK = 16 << 20


def put(k, v):
    print("%s %.3f" % (k, v), flush=True)


def timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def readers(path, n):
    fd = os.open(path, os.O_RDONLY)
    pieces = list(range(0, SIZE, CHUNK))
    def work(k):
        buf = bytearray(CHUNK)
        for off in pieces[k::n]:
            os.preadv(fd, [buf], off)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    s = timed(lambda: ([t.start() for t in ts], [t.join() for t in ts]))
    os.close(fd)
    return SIZE / s / 1e9


def writers(path, n):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(fd, SIZE)
    pieces = list(range(0, SIZE, CHUNK))
    def work(k):
        buf = os.urandom(1 << 20) * 16
        for off in pieces[k::n]:
            os.pwrite(fd, buf, off)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    s = timed(lambda: ([t.start() for t in ts], [t.join() for t in ts]))
    os.close(fd)
    os.unlink(path)
    return SIZE / s / 1e9


def vycp(src, dst, n=None):
    args = [vy, "cp", "--no-progress"] + (["--threads=%d" % n] if n else []) + [src, dst]
    s = timed(lambda: subprocess.run(args, check=True))
    return SIZE / s / 1e9


src = tmp + "/src4g"
subprocess.run("head -c %d /dev/urandom > %s" % (SIZE, src), shell=True, check=True)
default = min(os.cpu_count() or 1, 16)
put("ingest.threads", default)
for n in sorted({1, 4, default}):
    put("ingest.read_%d_gbps" % n, readers(src, n))
    put("ingest.in_%d_gbps" % n, vycp(src, mnt + "/in", n))
    os.unlink(mnt + "/in")
put("ingest.in_default_gbps", vycp(src, mnt + "/in"))
subprocess.run(["cmp", src, mnt + "/in"], check=True)
s = timed(lambda: subprocess.run(["cp", src, mnt + "/cp"], check=True))
put("ingest.cp_in_gbps", SIZE / s / 1e9)
os.unlink(mnt + "/cp")
for n in sorted({1, default}):
    put("ingest.write_%d_gbps" % n, writers(tmp + "/w", n))
    put("ingest.out_%d_gbps" % n, vycp(mnt + "/in", tmp + "/out", n))
    os.unlink(tmp + "/out")
os.unlink(mnt + "/in")
os.unlink(src)

try:
    import torch
    import vyrefs
    from safetensors.torch import load_file, save_file
    if not torch.cuda.is_available():
        raise ImportError("no GPU")
except ImportError:
    sys.exit(0)
torch.manual_seed(0)
tensors = {"w%d" % i: torch.randn((64 << 20) // (2 if i % 2 else 1) + 3, device="cuda").to(
    torch.float16 if i % 2 else torch.float32) for i in range(10)}
torch.cuda.synchronize()


def sync_ms(f):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    f()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


put("ingest.st_bytes", sum(t.numel() * t.element_size() for t in tensors.values()))
put("ingest.st_save_tmpfs_ms", sync_ms(lambda: save_file(tensors, tmp + "/m.safetensors")))
put("ingest.st_save_mount_ms", sync_ms(lambda: vyrefs.safetensors.save(tensors, mnt + "/m.safetensors")))
put("ingest.st_load_tmpfs_ms", sync_ms(lambda: load_file(tmp + "/m.safetensors", device="cuda")))
put("ingest.st_load_mount_ms", sync_ms(lambda: vyrefs.safetensors.load(mnt + "/m.safetensors")))
back = load_file(mnt + "/m.safetensors", device="cuda")
put("ingest.st_exact", float(all(torch.equal(back[k], tensors[k]) for k in tensors)))
os.unlink(tmp + "/m.safetensors")
os.unlink(mnt + "/m.safetensors")
