"""A mount over a directory against what users do instead (bench/run.sh,
phase `tier`; opt-in: BENCH_PHASES=tier; cuda, torch and transformers).

  python3 bench/tier_bench.py DISK_DIR TMPFS_DIR MNT_BASE [QUICK]

A Llama of 7B's shape (bf16, 13.5 GB, random weights made here; QUICK=1:
2 layers) is saved with save_pretrained in 5 GB shards into DISK_DIR/llama.
Each figure comes from fresh processes (imports and the CUDA context not
timed), medians of BENCH_REPS (3), the page cache dropped before each cold
run; every line `tier.KEY VALUE`.

A from_pretrained call is transformers' part (its model classes' import,
the config, the model built with no weights: about 8 s for this shape in a
fresh process, whatever the weights' source) and vyrefs' part
(load_state_dict and attach: every file mapped, so every byte loaded from
DIR, and the parameters pointed at them). The figures against a reader of
the same bytes take vyrefs' part (`own`); those against another whole load
take the whole call:
  build_ms            transformers' part alone: the model built with no
                      weights (attach_bench's `meta`), the floor of any load
  cold_disk_ms        vyrefs' part of from_pretrained(MNT/llama) on a fresh
                      backing=DISK_DIR mount: the loads
  cold_call_ms        the whole call
  fio_disk_ms         fio reading the same files sequentially with O_DIRECT
                      (one job a file, 16 MiB blocks, 4 in flight; FIO names
                      the binary; without fio, one dd a file with
                      iflag=direct: `tier.reader` says which)
  hf_disk_ms          transformers.from_pretrained(DISK_DIR/llama, device_map=cuda)
  cp_disk_ms          vyrefs cp -r DISK_DIR/llama into a volatile mount
  cold_vs_fio         cold_disk_ms / fio_disk_ms (target <= 1.1)
  cold_vs_hf          cold_call_ms / hf_disk_ms (target < 1)
  cold_tmpfs_ms       vyrefs' part on backing=TMPFS_DIR (the page cache)
  cp_tmpfs_ms         vyrefs cp -r TMPFS_DIR/llama into a volatile mount
  tmpfs_vs_cp         cp_tmpfs_ms / cold_tmpfs_ms (target >= 0.9)
  warm_ms             vyrefs' part again on the same mount (resident; the
                      target: a plain mount's, tens of ms); warm_call_ms whole
  load_gbps           the daemon's own rate of the cold loads
                      (tier_loaded_bytes / tier_load_us of .vyre/stats)
  logits_equal        1 when every load's logits equal transformers' own
  save_ms             save_pretrained into a backing mount (returns)
  sync_ms             then the fsync of the mount's root: DIR holds it
  fio_write_ms        fio writing as many bytes to DISK_DIR with O_DIRECT
  sync_vs_fio         fio_write_ms / sync_ms (target >= 0.9)
More models than the GPU holds: three copies of the model in DISK_DIR, a
mount whose resident_budget is 2.5 models, each attached in turn for three
rounds (fresh processes; skipped, and said, without room on the disk):
  evict_attaches      attaches that answered (9 of 9: none got ENOSPC)
  evict_evictions     files given back over the 9 (whole files, least
                      recently used first)
  evict_loaded_gb     bytes read from DIR over the 9 (3 models the first
                      round, then what the budget forced out)
  evict_reload_gbps   the rate of the loads after the first round (their
                      bytes / the daemon's load time: the cold rate)
  evict_own_gbps      the same bytes / vyrefs' part of those attaches
  evict_logits_equal  1 when every attach's logits equal transformers' own
TIER_PHASES (default cold,tmpfs,evict,writeback) runs some of them: a call
on the GPU machine is bounded, and the model is made once per machine.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import attach_bench as ab

VY = os.environ.get("VYREFS_BIN", "vyrefs")
FIO = os.environ.get("FIO", "fio")
REPS = int(os.environ.get("BENCH_REPS", "3"))


def put(k, v):
    print("tier.%s %.3f" % (k, v), flush=True)


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def mount(opts):
    mnt = tempfile.mkdtemp(prefix="vyrefs-tier-", dir=os.environ.get("TMPDIR", "/tmp"))
    subprocess.run([VY, "-o", opts, mnt], check=True, stdout=subprocess.DEVNULL)
    return mnt


def unmount(mnt):
    pid = open(os.path.join(mnt, ".vyre", "stats")).read().split("\npid ")[1].split()[0]
    subprocess.run(["fusermount3", "-u", mnt], check=True)
    for _ in range(6000):  # the daemon writes back what is dirty, then exits
        if not os.path.exists("/proc/" + pid):
            break
        time.sleep(0.01)
    os.rmdir(mnt)


def timed_run(*cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - t) * 1e3


def shards(d):
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".safetensors"))


def dd_read_ms(d):
    """Without fio (the GPU image has none): one dd a shard, all at once,
    16 MiB O_DIRECT reads: the storage's own sequential rate."""
    t = time.perf_counter()
    ps = [subprocess.Popen(["dd", "if=" + f, "of=/dev/null", "bs=16M", "iflag=direct", "status=none"])
          for f in shards(d)]
    if any(p.wait() != 0 for p in ps):
        raise SystemExit("dd failed reading " + d)
    return (time.perf_counter() - t) * 1e3


def fio_read_ms(d):
    if not shutil.which(FIO):
        return dd_read_ms(d)
    jobs = []
    for i, f in enumerate(shards(d)):
        jobs += ["--name=s%d" % i, "--filename=" + f, "--rw=read", "--bs=16M", "--direct=1",
                 "--ioengine=libaio", "--iodepth=4", "--size=%d" % os.path.getsize(f)]
    return timed_run(FIO, "--output-format=terse", *jobs)


def fio_write_ms(d, nbytes):
    f = os.path.join(d, "fio-write")
    if not shutil.which(FIO):  # dd: 16 MiB O_DIRECT writes, then fsync
        ms = timed_run("dd", "if=/dev/zero", "of=" + f, "bs=16M", "count=%d" % ((nbytes + (16 << 20) - 1) >> 24),
                       "oflag=direct", "conv=fsync", "status=none")
        os.unlink(f)
        return ms
    ms = timed_run(FIO, "--output-format=terse", "--name=w", "--filename=" + f, "--rw=write", "--bs=16M",
                   "--direct=1", "--ioengine=libaio", "--iodepth=4", "--size=%d" % nbytes, "--end_fsync=1")
    os.unlink(f)
    return ms


def load(mode, path):
    r = subprocess.run([sys.executable, os.path.abspath(ab.__file__), "one", mode, path], stdout=subprocess.PIPE,
                       text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def saved(path):
    """In a fresh process: a model saved into `path` (a backing mount's
    directory), and the fsync of the mount's root after it."""
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "save", path], stdout=subprocess.PIPE, text=True,
                       check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def stats(mnt):
    out = {}
    for line in open(os.path.join(mnt, ".vyre", "stats")):
        k, _, v = line.partition(" ")
        out[k] = v.strip()
    return out


def evictions(disk, src, size, hf_ref):
    """Three models, a budget of 2.5, three rounds (the issue's target)."""
    if shutil.disk_usage(disk).free < 2 * size + (4 << 30):
        print("tier.evict skipped: the disk has no room for two more copies", flush=True)
        return
    copies = [src] + [src + "-%d" % i for i in (2, 3)]
    for c in copies[1:]:
        shutil.copytree(src, c, dirs_exist_ok=True)
    drop_caches()
    mnt = mount("backend=cuda,backing=%s,resident_budget=%dM" % (disk, int(2.5 * size) >> 20))
    answered, same, own_ms, loaded_b, load_us = 0, True, 0.0, 0, 0
    try:
        for rnd in range(3):
            for c in copies:
                before = stats(mnt)
                r = load("vyrefs", os.path.join(mnt, os.path.basename(c)))
                answered += 1
                same &= r["logits"] == hf_ref
                after = stats(mnt)
                if rnd:
                    own_ms += r["own_ms"]
                    loaded_b += int(after["tier_loaded_bytes"]) - int(before["tier_loaded_bytes"])
                    load_us += int(after["tier_load_us"]) - int(before["tier_load_us"])
        st = stats(mnt)
        put("evict_attaches", answered)
        put("evict_evictions", int(st["tier_evictions"]))
        put("evict_loaded_gb", int(st["tier_loaded_bytes"]) / 1e9)
        put("evict_reload_gbps", loaded_b / load_us / 1e3 if load_us else 0)
        put("evict_own_gbps", loaded_b / own_ms / 1e6 if own_ms else 0)
        put("evict_logits_equal", float(same))
    finally:
        unmount(mnt)
        for c in copies[1:]:
            shutil.rmtree(c)


def make(where, quick):
    """attach_bench's model, in 5 GB shards as the issue's figures take it."""
    ab.make(where, quick, max_shard_size="5GB")


def save_one(path):
    import torch
    import transformers
    import vyrefs.torch
    with vyrefs.torch.empty_weights():
        model = transformers.LlamaForCausalLM(ab.config(os.environ.get("TIER_QUICK") == "1")).to(torch.bfloat16)
    for mod in model.modules():
        for key, p in list(mod._parameters.items()):
            if p is not None:
                mod._parameters[key] = torch.nn.Parameter(torch.ones(p.shape, dtype=torch.bfloat16, device="cuda"),
                                                          requires_grad=False)
    torch.cuda.synchronize()
    t = time.perf_counter()
    model.save_pretrained(path, max_shard_size="5GB")
    save_ms = (time.perf_counter() - t) * 1e3
    root = path
    while not os.path.exists(os.path.join(root, ".vyre")):
        root = os.path.dirname(root)
    t = time.perf_counter()
    fd = os.open(root, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    print(json.dumps({"save_ms": save_ms, "sync_ms": (time.perf_counter() - t) * 1e3}), flush=True)


def cold_and_warm(disk, src, opts, hf_ref):
    med = statistics.median
    cold, call, fio, hf, cp, rate = [], [], [], [], [], []
    same = True
    for _ in range(REPS):
        drop_caches()
        mnt = mount(opts + ",backing=" + disk)
        r = load("vyrefs", os.path.join(mnt, "llama"))
        cold.append(r["own_ms"])
        call.append(r["load_ms"])
        st = stats(mnt)
        rate.append(int(st["tier_loaded_bytes"]) / max(int(st["tier_load_us"]), 1) / 1e3)
        same &= r["logits"] == hf_ref
        w = load("vyrefs", os.path.join(mnt, "llama"))  # warm: resident now
        same &= w["logits"] == hf_ref
        unmount(mnt)
        drop_caches()
        fio.append(fio_read_ms(src))
        drop_caches()
        hf.append(load("hf", src)["load_ms"])
        drop_caches()
        vol = mount(opts)
        cp.append(timed_run(VY, "cp", "-r", src, vol + "/"))
        unmount(vol)
    put("cold_disk_ms", med(cold))
    put("cold_call_ms", med(call))
    put("warm_ms", w["own_ms"])
    put("warm_call_ms", w["load_ms"])
    put("load_gbps", med(rate))
    put("fio_disk_ms", med(fio))
    put("hf_disk_ms", med(hf))
    put("cp_disk_ms", med(cp))
    put("cold_vs_fio", med(cold) / med(fio))
    put("cold_vs_hf", med(call) / med(hf))
    return same


def from_tmpfs(tmpfs, src, opts, hf_ref):
    med = statistics.median
    tsrc = os.path.join(tmpfs, "llama")
    shutil.copytree(src, tsrc, dirs_exist_ok=True)
    tc, tcp = [], []
    same = True
    try:
        for _ in range(REPS):
            mnt = mount(opts + ",backing=" + tmpfs)
            r = load("vyrefs", os.path.join(mnt, "llama"))
            tc.append(r["own_ms"])
            same &= r["logits"] == hf_ref
            unmount(mnt)
            vol = mount(opts)
            tcp.append(timed_run(VY, "cp", "-r", tsrc, vol + "/"))
            unmount(vol)
    finally:
        shutil.rmtree(tsrc)
    put("cold_tmpfs_ms", med(tc))
    put("cp_tmpfs_ms", med(tcp))
    put("tmpfs_vs_cp", med(tcp) / med(tc))
    return same


def writeback(disk, opts):
    """A save into the mount, then the fsync of its root."""
    out = os.path.join(disk, "saved")
    os.makedirs(out, exist_ok=True)
    mnt = mount(opts + ",backing=" + disk + ",writeback_delay=1h")
    s = saved(os.path.join(mnt, "saved"))
    unmount(mnt)
    written = sum(os.path.getsize(f) for f in shards(out))
    shutil.rmtree(out)
    put("save_ms", s["save_ms"])
    put("sync_ms", s["sync_ms"])
    fw = fio_write_ms(disk, written)
    put("fio_write_ms", fw)
    put("sync_vs_fio", fw / s["sync_ms"])


def main(disk, tmpfs, quick):
    os.environ["TIER_QUICK"] = "1" if quick else "0"
    phases = os.environ.get("TIER_PHASES", "cold,tmpfs,evict,writeback").split(",")
    src = os.path.join(disk, "llama")
    if not os.path.exists(os.path.join(src, "config.json")):
        subprocess.run([sys.executable, os.path.abspath(__file__), "make", src, "1" if quick else "0"], check=True,
                       stdout=subprocess.DEVNULL)
    size = sum(os.path.getsize(f) for f in shards(src))
    put("model_gb", size / 1e9)
    print("tier.reader %s" % ("fio" if shutil.which(FIO) else "dd"), flush=True)
    opts = "backend=cuda"
    hf_ref = load("hf", src)["logits"]
    put("build_ms", statistics.median(load("meta", src)["build_ms"] for _ in range(REPS)))
    same = True
    if "cold" in phases:
        same &= cold_and_warm(disk, src, opts, hf_ref)
    if "tmpfs" in phases:
        same &= from_tmpfs(tmpfs, src, opts, hf_ref)
    put("logits_equal", float(same))
    if "evict" in phases:
        evictions(disk, src, size, hf_ref)
    if "writeback" in phases:
        writeback(disk, opts)


if __name__ == "__main__":
    if sys.argv[1] == "save":
        save_one(sys.argv[2])
    elif sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3] == "1")
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        main(sys.argv[1], sys.argv[2], len(sys.argv) > 4 and sys.argv[4] == "1")
