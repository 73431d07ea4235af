#!/usr/bin/env python3
"""Turn bench/out/results.txt into the figures section of BENCHMARKS.md and
a plot of sequential throughput against block size.

usage: report.py RESULTS OUTDIR [--doc docs/BENCHMARKS.md --png docs/bench-throughput.png]

Writes OUTDIR/figures.md and OUTDIR/throughput.png (when matplotlib is
there). With --doc, replaces the text between the figures markers of that
file; with --png, copies the plot there. Every ratio is vyrefs over its
baseline from the same run."""
import shutil
import sys

BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"
BLOCKS = ["4K", "16K", "64K", "256K", "1M", "4M"]
TARGETS = ["vyrefs", "nullfs", "tmpfs"]
NAMES = {"vyrefs": "vyrefs", "nullfs": "null FUSE", "tmpfs": "tmpfs"}


def load(path):
    r = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition(" ")
            if key:
                r[key] = value
    return r


def num(r, key):
    try:
        return float(r[key])
    except (KeyError, ValueError):
        return None


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def fmt(v, digits=2):
    return "n/a" if v is None else ("%.*f" % (digits, v))


def size_text(b):
    if b is None:
        return "n/a"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d %s" % (b >> shift, unit)
    return "%d bytes" % b


def how_copied(peer, staged, size):
    """What the stats say of one copy of size bytes between devices."""
    if peer is None or staged is None or size is None:
        return "n/a"
    if peer == size and staged == 0:
        return "peer"
    if staged == size and peer == 0:
        return "through host memory"
    return "**neither: peer %d, staged %d of %d bytes**" % (peer, staged, size)


def verdict(value, target, at_least):
    if value is None:
        return "not measured"
    ok = value >= target if at_least else value <= target
    return "**met**" if ok else "**missed**"


def build(r):
    out = []
    targets = []  # (what, measured ratio, target text, verdict)
    add = out.append
    add("Device: %s, driver %s. Kernel %s; CPU %s." % (
        r.get("meta.gpu", "none (backend %s)" % r.get("meta.backend")), r.get("meta.driver", "n/a"),
        r.get("meta.kernel"), r.get("meta.cpu")))
    add("Run %s at commit `%s`%s; fio: %s." % (
        r.get("meta.date"), r.get("meta.commit"),
        " (BENCH_QUICK: smoke sizes, not figures)" if r.get("meta.quick") == "1" else "", r.get("meta.fio")))
    if r.get("meta.opts", "none") != "none":
        add("Every vyrefs and null fs mount had `-o %s` (BENCH_OPTS)." % r["meta.opts"])
    add("")

    if "raw.h2d_gbps" in r:
        add("### Raw driver baselines (bench/cudaraw.c)")
        add("")
        add("| figure | value |")
        add("| --- | --- |")
        for key, what in [("raw.h2d_gbps", "pinned H2D, GB/s"), ("raw.d2h_gbps", "pinned D2H, GB/s"),
                          ("raw.launch_sync_us", "launch + sync, µs"), ("raw.launch_async_us", "async launch, µs each of 1000"),
                          ("raw.alloc_free_us", "cuMemAlloc + cuMemFree 1 MiB, µs"),
                          ("raw.d2h_4k_us", "4 KiB pinned D2H + stream sync, µs"),
                          ("raw.d2h_4k_blocking_us", "4 KiB blocking cuMemcpyDtoH, µs"),
                          ("raw.d2h_4k_x4_us", "4 KiB pinned D2H + sync, 4 threads on 4 streams, µs each"),
                          ("raw.d2h_128k_us", "128 KiB pinned D2H + stream sync, µs"),
                          ("raw.event_pair_us", "2 events created, recorded, timed, destroyed, µs")]:
            add("| %s | %s |" % (what, r.get(key, "n/a")))
        add("")

    add("### Sequential, dd, single stream (GB/s)")
    add("")
    add("Each block size on every target in turn; a write once, then its read the median of %s, each after dropping caches." % r.get("meta.reps", "1"))
    add("")
    add("| bs | vyrefs write | null FUSE write | ratio | tmpfs write | vyrefs read | null FUSE read | ratio | tmpfs read |")
    add("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = {"write": None, "read": None}
    for bs in BLOCKS:
        row = [bs]
        for rw in ("write", "read"):
            v, n, t = (num(r, "dd.%s.%s.%s" % (x, rw, bs)) for x in TARGETS)
            q = ratio(v, n)
            if q is not None:
                worst[rw] = q if worst[rw] is None else min(worst[rw], q)
            row += [fmt(v), fmt(n), fmt(q), fmt(t)]
        add("| " + " | ".join(row) + " |")
    add("")
    for rw in ("write", "read"):
        targets.append(("dd sequential %s, worst block size" % rw, worst[rw], "≥ 0.9", verdict(worst[rw], 0.9, True)))

    if "fio.vyrefs.seq.write" in r:
        add("### fio sequential, bs 1M: one job on one file, and 8 jobs on 8 files (GB/s)")
        add("")
        add("The one-job read is the median of %s runs, each after dropping caches." % r.get("meta.reps", "1"))
        add("")
        add("| workload | vyrefs | null FUSE | ratio | tmpfs |")
        add("| --- | --- | --- | --- | --- |")
        for kind, label in (("seq", "1 job"), ("par8", "8 jobs")):
            for rw in ("write", "read"):
                v, n, t = (num(r, "fio.%s.%s.%s" % (x, kind, rw)) for x in TARGETS)
                q = ratio(v, n)
                add("| %s %s | %s | %s | %s | %s |" % (label, rw, fmt(v), fmt(n), fmt(q), fmt(t)))
                targets.append(("fio %s %s" % (label, rw), q, "≥ 0.9", verdict(q, 0.9, True)))
        add("")
        add("### Random 4 KiB reads, fio, direct=1, io_uring")
        add("")
        add("| iodepth, jobs | vyrefs IOPS | null FUSE IOPS | ratio | tmpfs IOPS | vyrefs p50 / p99 µs | null FUSE p50 / p99 µs |")
        add("| --- | --- | --- | --- | --- | --- | --- |")
        for qd in (1, 32):
            for j in (1, 4):
                k = "fio.%%s.rand.qd%d.j%d.%%s" % (qd, j)
                v, n, t = (num(r, k % (x, "iops")) for x in TARGETS)
                q = ratio(v, n)
                add("| %d, %d | %s | %s | %s | %s | %s / %s | %s / %s |" % (
                    qd, j, fmt(v, 0), fmt(n, 0), fmt(q), fmt(t, 0),
                    r.get(k % ("vyrefs", "p50_us"), "n/a"), r.get(k % ("vyrefs", "p99_us"), "n/a"),
                    r.get(k % ("nullfs", "p50_us"), "n/a"), r.get(k % ("nullfs", "p99_us"), "n/a")))
                targets.append(("random 4K reads, iodepth %d, %d jobs" % (qd, j), q, "≥ 0.8", verdict(q, 0.8, True)))
        add("")
        # The copy each read adds, alone (1 job) and with 4 copies in flight (4 jobs).
        d2h = {1: num(r, "raw.d2h_4k_us"), 4: num(r, "raw.d2h_4k_x4_us") or num(r, "raw.d2h_4k_us")}
        ceil = []
        for j in (1, 4):
            n = num(r, "fio.nullfs.rand.qd1.j%d.iops" % j)
            if d2h[j] and n:
                lat = 1e6 * j / n  # the null fs's mean µs per read of one job
                ceil.append("%d job(s), copy %s µs: %.2f" % (j, fmt(d2h[j]), lat / (lat + d2h[j])))
        if ceil:
            add("At iodepth 1 each read waits for one device copy the null fs does not make: the best ratio "
                "possible is null latency / (null latency + raw 4 KiB D2H + sync) = %s." % "; ".join(ceil))
            add("")

    add("### Control file")
    add("")
    beside = "ctl.beside_launch_sync_us" in r
    if beside:
        add("The raw launch figures here were taken again right beside these (`cudaraw PTX launch`): "
            "raw launch + sync %s µs, async launch %s µs (%s and %s in the raw phase)." % (
                r["ctl.beside_launch_sync_us"], r.get("ctl.beside_launch_async_us"),
                r.get("raw.launch_sync_us"), r.get("raw.launch_async_us")))
        add("")
    add("| figure | vyrefs | baseline | ratio |")
    add("| --- | --- | --- | --- |")
    rtt_n, rtt_v = num(r, "rtt.nullfs_us"), num(r, "rtt.vyrefs_us")
    add("| 1-byte write round trip, µs | %s | null FUSE %s | %s |" % (fmt(rtt_v), fmt(rtt_n), fmt(ratio(rtt_v, rtt_n))))
    raw_key = "ctl.beside_%s" if beside else "raw.%s"
    launch, sync = num(r, "ctl.launch_us"), num(r, raw_key % "launch_sync_us")
    base = None if rtt_n is None or sync is None else rtt_n + sync
    q = ratio(launch, base)
    add("| one launch per write (the write returns once it ran; its status is the outcome), µs | %s | null FUSE write + raw launch+sync = %s | %s |" % (
        fmt(launch), fmt(base), fmt(q)))
    read_too = num(r, "ctl.launch_read_us")
    base2 = None if base is None else base + rtt_n
    q2 = ratio(read_too, base2)
    add("| the same, then the reply text read (a second round trip), µs | %s | 2 null FUSE round trips + raw launch+sync = %s | %s |" % (
        fmt(read_too), fmt(base2), fmt(q2)))
    targets.append(("ctl launch, the write's status as reply, vs FUSE round trip + launch+sync", q, "≤ 1.5", verdict(q, 1.5, False)))
    targets.append(("ctl launch, then the reply text read, vs 2 FUSE round trips + launch+sync", q2, "≤ 1.5", verdict(q2, 1.5, False)))
    step, async_ = num(r, "ctl.repeat1000_step_us"), num(r, raw_key % "launch_async_us")
    q = ratio(step, async_)
    add("| per step of `repeat 1000`, µs | %s | raw async launch %s | %s |" % (fmt(step, 3), fmt(async_, 3), fmt(q)))
    targets.append(("ctl repeat 1000, per step vs raw async launch", q, "≤ 1.2", verdict(q, 1.2, False)))
    add("| `fill` of 1 GiB, GB/s | %s | (a device memset) | |" % fmt(num(r, "ctl.fill_gbps"), 1))
    inproc, first, touch = num(r, "ctl.launch_inproc_us"), num(r, "ctl.first_touch_1g_us"), num(r, "ctl.touch_1g_us")
    if inproc is not None:
        add("| one launch per write, in the launcher, µs | %s | in the daemon's own context %s | %s |" % (
            fmt(launch), fmt(inproc), fmt(ratio(launch, inproc))))
        step_in = num(r, "ctl.repeat1000_inproc_step_us")
        add("| per step of `repeat 1000`, in the launcher, µs | %s | in the daemon's own context %s | %s |" % (
            fmt(step, 3), fmt(step_in, 3), fmt(ratio(step, step_in))))
    sock = num(r, "ctl.launch_socket_us")
    if sock is not None:
        add("| one launch per write, launcher channel through the shared mailbox, µs | %s | through a socket %s | %s |" % (
            fmt(launch), fmt(sock), fmt(ratio(launch, sock))))
    if first is not None:
        add("| first sequence naming a new 1 GiB file (export, import, map), µs | %s | the next one %s | %s |" % (
            fmt(first), fmt(touch), fmt(ratio(first, touch))))
    add("")

    if num(r, "std.sum_1g_gbps") is not None:
        add("### CUDA C and the std module")
        add("")
        add("| figure | vyrefs | baseline | ratio |")
        add("| --- | --- | --- | --- |")
        first, cached = num(r, "std.cu_first_ms"), num(r, "std.cu_cached_ms")
        add("| copy a small `.cu` into modules/: NVRTC compile and load, ms | %s | from the cache %s | %s |" % (
            fmt(first, 1), fmt(cached, 1), fmt(ratio(first, cached))))
        fl, ln = num(r, "std.first_launch_ms"), num(r, "std.launch_ms")
        add("| first launch naming `std` (compile std.cu, load), ms | %s | the next launch %s | %s |" % (
            fmt(fl, 1), fmt(ln, 1), fmt(ratio(fl, ln))))
        s, c = num(r, "std.sum_1g_gbps"), num(r, "std.copy_1g_gbps")
        q = ratio(s, c)
        add("| `std.sum_f32` of 1 GiB, `n= grid=auto`, GB/s read | %s | device-to-device copy, GB/s read+written %s | %s |" % (
            fmt(s, 1), fmt(c, 1), fmt(q)))
        add("| `std.sum_f32` of 1 GiB, `n=` (one thread per element), GB/s | %s | | %s |" % (
            fmt(num(r, "std.sum_1g_thread_each_gbps"), 1), fmt(ratio(num(r, "std.sum_1g_thread_each_gbps"), c))))
        targets.append(("std.sum_f32 of 1 GiB vs device memory bandwidth (d2d copy)", q, "≥ 0.8", verdict(q, 0.8, True)))
        add("")

    if num(r, "map.map_4g_ms") is not None:
        add("### Mapping a file into PyTorch (`vyrefs.map`)")
        add("")
        add("| figure | vyrefs.map | baseline | ratio |")
        add("| --- | --- | --- | --- |")
        rd, mp = num(r, "map.read_cuda_4g_s"), num(r, "map.map_4g_ms")
        q = None if rd is None or not mp else rd * 1e3 / mp
        add("| 4 GiB file into a CUDA tensor, ms | %s | read() into pinned memory + .cuda(): %s | %s× faster |" % (
            fmt(mp, 2), fmt(None if rd is None else rd * 1e3), fmt(q, 0)))
        targets.append(("map 4 GiB into torch vs read()+.cuda()", q, "≥ 100× and < 5 ms",
                        "met" if q is not None and q >= 100 and mp < 5 else "missed"))
        sizes = ["1m", "64m", "1g", "4g", "16g"]
        add("| map time by file size (1 MiB, 64 MiB, 1 GiB, 4 GiB, 16 GiB), ms | %s | | |" % ", ".join(
            fmt(num(r, "map.map_%s_ms" % z), 2) for z in sizes))
        t, mo, sm = num(r, "map.st_tmpfs_ms"), num(r, "map.st_mount_ms"), num(r, "map.st_map_ms")
        add("| safetensors 2 GiB as CUDA tensors, ms | mapped %s | load_file from tmpfs %s; from the mount %s | %s× faster than tmpfs |" % (
            fmt(sm, 2), fmt(t), fmt(mo), fmt(None if not sm or t is None else t / sm, 0)))
        add("")

    if num(r, "attach.vyrefs_first_ms") is not None:
        add("### A whole model to its first answer (`vyrefs.transformers.from_pretrained`, %s MiB of bf16 weights)"
            % fmt(num(r, "attach.model_mib"), 0))
        add("")
        add("| figure | vyrefs | baseline | ratio |")
        add("| --- | --- | --- | --- |")
        v, b = num(r, "attach.vyrefs_first_ms"), num(r, "attach.baseline_first_ms")
        q = ratio(v, b)
        add("| load + one forward, ms | %s (from_pretrained %s, of which vyrefs' own %s) | built on meta %s + the same forward %s: %s | %s |" % (
            fmt(v), fmt(num(r, "attach.vyrefs_load_ms")), fmt(num(r, "attach.vyrefs_own_ms"), 2),
            fmt(num(r, "attach.build_ms")), fmt(num(r, "attach.forward_ms")), fmt(b), fmt(q)))
        targets.append(("model to first answer vs built on meta + forward", q, "≤ 1.1", verdict(q, 1.1, False)))
        add("| transformers' from_pretrained + forward, ms | %s | from tmpfs %s; from the mount %s | %s× / %s× faster |" % (
            fmt(v), fmt(num(r, "attach.hf_tmpfs_first_ms")), fmt(num(r, "attach.hf_mount_first_ms")),
            fmt(num(r, "attach.speedup_tmpfs"), 1), fmt(num(r, "attach.speedup_mount"), 1)))
        add("| device memory a second process took, MiB | %s | from_pretrained from tmpfs %s | |" % (
            fmt(num(r, "attach.second_mib"), 0), fmt(num(r, "attach.hf_mib"), 0)))
        add("| logits bit for bit those of from_pretrained | %s | | |" % (
            "yes" if num(r, "attach.logits_equal") == 1 else "no"))
        add("")

    if num(r, "ingest.in_default_gbps") is not None:
        add("### Into and out of the mount (`vyrefs cp`, safetensors)")
        add("")
        add("| figure | vyrefs | baseline | ratio |")
        add("| --- | --- | --- | --- |")
        d = int(num(r, "ingest.threads") or 1)
        for n in sorted({1, 4, d}):
            i, rd = num(r, "ingest.in_%d_gbps" % n), num(r, "ingest.read_%d_gbps" % n)
            add("| 4 GiB from tmpfs into the mount, %d thread(s), GB/s | %s | %d readers of the source %s | %s |" % (
                n, fmt(i), n, fmt(rd), fmt(ratio(i, rd))))
        q = ratio(num(r, "ingest.in_%d_gbps" % d), num(r, "ingest.read_%d_gbps" % d))
        targets.append(("vyrefs cp in, default threads, vs readers of the source", q, "≥ 0.8", verdict(q, 0.8, True)))
        dflt = num(r, "ingest.in_default_gbps")
        targets.append(("vyrefs cp in, default threads, GB/s", dflt, "≥ 30", verdict(dflt, 30, True)))
        one = num(r, "ingest.in_1_gbps")
        targets.append(("vyrefs cp in, one thread, GB/s", one, "≥ 5", verdict(one, 5, True)))
        add("| coreutils cp into the mount (through FUSE), GB/s | %s | | |" % fmt(num(r, "ingest.cp_in_gbps")))
        for n in sorted({1, d}):
            o, w = num(r, "ingest.out_%d_gbps" % n), num(r, "ingest.write_%d_gbps" % n)
            add("| 4 GiB out of the mount into tmpfs, %d thread(s), GB/s | %s | %d writers of tmpfs %s | %s |" % (
                n, fmt(o), n, fmt(w), fmt(ratio(o, w))))
        q = ratio(num(r, "ingest.out_%d_gbps" % d), num(r, "ingest.write_%d_gbps" % d))
        targets.append(("vyrefs cp out, default threads, vs writers of tmpfs", q, "≥ 0.8", verdict(q, 0.8, True)))
        sv, st = num(r, "ingest.st_save_mount_ms"), num(r, "ingest.st_save_tmpfs_ms")
        add("| safetensors save of %s GiB of CUDA tensors, ms | into the mount %s | save_file to tmpfs %s | %s |" % (
            fmt((num(r, "ingest.st_bytes") or 0) / 2**30), fmt(sv), fmt(st), fmt(ratio(sv, st))))
        lv, lt = num(r, "ingest.st_load_mount_ms"), num(r, "ingest.st_load_tmpfs_ms")
        add("| safetensors load as CUDA tensors, ms | zero-copy %s | load_file from tmpfs %s | %s |" % (
            fmt(lv, 2), fmt(lt), fmt(ratio(lv, lt), 3)))
        targets.append(("safetensors load, zero copy, ms", lv, "< 5", verdict(lv, 5, False)))
        add("")

    if any(k.startswith("grow.") for k in r):
        add("### Growth up to a full budget (4 KiB appends until ENOSPC, 256 MiB)")
        add("")
        add("| target | bytes written | µs per MiB, first tenth | µs per MiB, last tenth | last / first |")
        add("| --- | --- | --- | --- | --- |")
        for t in ("cuda", "host", "tmpfs"):
            first, last = num(r, "grow.%s.first_us_per_mib" % t), num(r, "grow.%s.last_us_per_mib" % t)
            if first is None:
                continue
            q = ratio(last, first)
            add("| %s | %s | %s | %s | %s |" % ("vyrefs, " + t if t != "tmpfs" else t,
                r.get("grow.%s.bytes" % t, "n/a"), fmt(first, 1), fmt(last, 1), fmt(q, 3)))
            if t != "tmpfs":
                targets.append(("append loop, last tenth / first tenth (%s)" % t, q, "≤ 1.2", verdict(q, 1.2, False)))
        add("")

    if "state.append_ns" in r:
        add("### The state log's append (bench/statebench, ns per record of 64..200 bytes + a 16-byte reply)")
        add("")
        add("| figure | value |")
        add("| --- | --- |")
        add("| append: checksum, copy into the ring, tail store | %s |" % fmt(num(r, "state.append_ns"), 1))
        add("| memcpy of the same bytes into a ring (baseline) | %s |" % fmt(num(r, "state.memcpy_ns"), 1))
        add("| append / memcpy | %s |" % fmt(num(r, "state.append_ratio")))
        add("| XXH3-64 alone (the log's checksum) | %s |" % fmt(num(r, "state.xxh3_ns"), 1))
        add("| crc32c by SSE4.2 alone (the alternative) | %s |" % fmt(num(r, "state.crc32c_hw_ns"), 1))
        add("")

    add("### Allocation")
    add("")
    pooled, raw_alloc = num(r, "store.pool_alloc_free_us"), num(r, "raw.alloc_free_us")
    q = ratio(pooled, raw_alloc)
    add("| figure | value |")
    add("| --- | --- |")
    add("| store alloc + free of 1 MiB, pool reuse, µs | %s |" % fmt(pooled, 3))
    add("| store alloc + free of 1 MiB, no pool, µs | %s |" % fmt(num(r, "store.nopool_alloc_free_us")))
    add("| raw cuMemAlloc + cuMemFree of 1 MiB, µs | %s |" % fmt(raw_alloc))
    add("| pool reuse / raw | %s |" % fmt(q, 4))
    for x in ("vyrefs", "vyrefs_nopool", "nullfs", "tmpfs"):
        add("| create, truncate 1 MiB, close, unlink: %s, ops/s | %s |" % (
            x.replace("_nopool", " with pool_budget=0").replace("nullfs", "null FUSE"), r.get("churn.%s.ops" % x, "n/a")))
    add("| pool hit rate over the vyrefs churn | %s |" % r.get("churn.vyrefs.pool_hit_rate", "n/a"))
    add("")
    if "handles.vyrefs.open_us" in r:
        add("### A handle's life (µs, medians: open + close of a 4 KiB file; opendir, readdir of 100 entries, closedir)")
        add("")
        add("| target | open + close | readdir |")
        add("| --- | --- | --- |")
        for x in ("vyrefs", "nullfs", "tmpfs"):
            add("| %s | %s | %s |" % (x.replace("nullfs", "null FUSE"), r.get("handles.%s.open_us" % x, "n/a"),
                                      r.get("handles.%s.readdir_us" % x, "n/a")))
        add("| vyrefs / null FUSE | %s | %s |" % (r.get("handles.open_over_nullfs", "n/a"),
                                                  r.get("handles.readdir_over_nullfs", "n/a")))
        add("")
    targets.append(("pooled allocation vs cuMemAlloc + cuMemFree", q, "≤ 0.05", verdict(q, 0.05, False)))

    for feature, rw, key, what in (("write_behind", "write", "nowb", "dd write"),
                                   ("readahead", "read", "nora", "dd read after dropping caches")):
        if "dd.vyrefs_%s.%s.4K" % (key, rw) not in r:
            continue
        add("### %s on and off (%s, GB/s; off measured on a quarter of the size)" % (feature, what))
        add("")
        add("| bs | %s=on | %s=off | on / off |" % (feature, feature))
        add("| --- | --- | --- | --- |")
        for bs in ("4K", "1M"):
            on, off = num(r, "dd.vyrefs.%s.%s" % (rw, bs)), num(r, "dd.vyrefs_%s.%s.%s" % (key, rw, bs))
            add("| %s | %s | %s | %s |" % (bs, fmt(on), fmt(off), fmt(ratio(on, off))))
        add("")

    if "fio.vyrefs_libfuse.par8.read" in r:
        add("### Request loops: ours (`idle_threads=2`, the default) and libfuse's (`idle_threads=0`)")
        add("")
        add("Each on a fresh mount, in the order null FUSE ours, libfuse's, then vyrefs ours, libfuse's; "
            "each after 8 parallel writers and readers (the first two rows).")
        add("")
        add("| figure | vyrefs, ours | vyrefs, libfuse's | ours / libfuse's | null FUSE, ours | null FUSE, libfuse's | ours / libfuse's |")
        add("| --- | --- | --- | --- | --- | --- | --- |")
        rows = [("fio.%s.par8.write", "8 jobs write, GB/s", 2), ("fio.%s.par8.read", "8 jobs read, GB/s", 2)]
        for qd in (1, 32):
            for j in (1, 4):
                rows.append(("fio.%%s.rand.qd%d.j%d.iops" % (qd, j), "random 4 KiB reads, iodepth %d, %d job%s, IOPS" % (
                    qd, j, "s" if j > 1 else ""), 0))
        rows.append(("rtt.%s_us", "write round trip, µs (lower is better)", 1))
        for key, what, digits in rows:
            v, vl, n, nl = (num(r, key % x) for x in ("vyrefs_ours", "vyrefs_libfuse", "nullfs_ours", "nullfs_libfuse"))
            add("| %s | %s | %s | %s | %s | %s | %s |" % (what, fmt(v, digits), fmt(vl, digits), fmt(ratio(v, vl)),
                                                          fmt(n, digits), fmt(nl, digits), fmt(ratio(n, nl))))
        lo, ll = num(r, "ctl.launch_ours_us"), num(r, "ctl.launch_libfuse_us")
        add("| one launch per write, µs (lower is better) | %s | %s | %s | | | |" % (fmt(lo), fmt(ll), fmt(ratio(lo, ll))))
        add("")

    add("### `cp` of a 1 GiB file inside the mount (GB/s)")
    add("")
    add("| vyrefs | null FUSE | tmpfs |")
    add("| --- | --- | --- |")
    add("| %s | %s | %s |" % tuple(r.get("cp.%s.gbps" % x, "n/a") for x in TARGETS))
    add("")

    if any(k.startswith("devices.") for k in r):
        size = num(r, "devices.bytes")
        size = None if size is None else int(size)
        add("### Multi-GPU: one mount over two devices (`devices=0,1`)")
        add("")
        add("Devices: %s; GPU0-GPU1 link (`nvidia-smi topo -m`): %s; raw peer access: %s. "
            "Each vyrefs copy is the median of %s after a warm-up, the raw one of 5." % (
                r.get("devices.gpus", "n/a"), r.get("devices.link", "n/a"),
                r.get("devices.raw_peer_access", "n/a"), r.get("meta.reps", "3")))
        add("")
        add("| figure | vyrefs | baseline | ratio | how the bytes went (.vyre/stats) |")
        add("| --- | --- | --- | --- | --- |")
        for rw in ("write", "read"):
            two, one = num(r, "devices.fio.two_gpus.%s_gbps" % rw), num(r, "devices.fio.one_gpu.%s_gbps" % rw)
            if two is not None or one is not None:
                add("| fio, 2 jobs at once, bs 1M, %s: a file on each device, GB/s | %s | both files on device 0: %s | %s | |" % (
                    rw, fmt(two), fmt(one), fmt(ratio(two, one))))
        raw = num(r, "devices.raw_peer_gbps")
        z = size_text(size)
        hits = {k: r.get("devices.%s.pool_hits" % k, "n/a") for k in ("move", "copy_new")}
        for key, what, target in (
                ("move", "move of a %s file to device 1 (set `user.vyre.device`; its memory there taken on the way, "
                 "pool hits %s), GB/s" % (z, hits["move"]), True),
                ("copy", "copy_file_range of a %s file from d0/ into a file of d1/ that has its memory, GB/s" % z, True),
                ("copy_new", "the same into a new file, as cp makes it (memory taken on the way, pool hits %s), GB/s" % (
                    hits["copy_new"]), False)):
            v = num(r, "devices.%s_gbps" % key)
            q = ratio(v, raw)
            add("| %s | %s | raw cuMemcpyPeer, device 0 to 1: %s | %s | %s |" % (
                what, fmt(v), fmt(raw), fmt(q),
                how_copied(num(r, "devices.%s.peer_bytes" % key), num(r, "devices.%s.staged_bytes" % key), size)
                if key != "copy_new" else ""))
            if target:
                targets.append(("%s between devices vs raw cuMemcpyPeer" % key, q, "≥ 0.8", verdict(q, 0.8, True)))
        back = num(r, "devices.move_back_gbps")
        if back is not None:
            add("| the move back to device 0, GB/s | %s | | | |" % fmt(back))
        staged, peer = num(r, "devices.move_staged_gbps"), num(r, "devices.move_gbps")
        if staged is not None:
            add("| the move with `peer=off` (through host memory), GB/s | %s | the peer move: %s | %s | %s |" % (
                fmt(staged), fmt(peer), fmt(ratio(staged, peer)),
                how_copied(num(r, "devices.move_staged.peer_bytes"), num(r, "devices.move_staged.staged_bytes"), size)))
        add("")

    head = ["### Targets", "", "| target | measured ratio | goal | |", "| --- | --- | --- | --- |"]
    head += ["| %s | %s | %s | %s |" % (w, fmt(q), g, v) for w, q, g, v in targets]
    return "\n".join(out[:3] + head + [""] + out[3:]) + "\n"


def plot(r, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report: no matplotlib; no plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    x = range(len(BLOCKS))
    for ax, rw in zip(axes, ("write", "read")):
        for t, style in zip(TARGETS, ("o-", "s--", "^:")):
            ax.plot(x, [num(r, "dd.%s.%s.%s" % (t, rw, bs)) or 0 for bs in BLOCKS], style, label=NAMES[t])
        if rw == "write":
            # Around FUSE: vyrefs cp (the daemon moves the bytes) beside
            # coreutils cp into the mount, both whole 4 GiB files.
            for key, style, label in (("ingest.in_default_gbps", "-", "vyrefs cp into vyrefs"),
                                      ("ingest.cp_in_gbps", "-.", "cp into vyrefs")):
                v = num(r, key)
                if v:
                    ax.axhline(v, linestyle=style, color="gray" if "cp_in" in key else "black", label=label)
        ax.set_xticks(list(x))
        ax.set_xticklabels(BLOCKS)
        ax.set_yscale("log")
        ax.set_xlabel("dd block size")
        ax.set_title("sequential %s, %s" % (rw, "4 GiB" if r.get("meta.quick") != "1" else "smoke"))
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("GB/s")
    axes[0].legend(loc="center right", fontsize=8)
    fig.suptitle("%s, commit %s" % (r.get("meta.gpu", r.get("meta.backend")), r.get("meta.commit")))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv):
    if len(argv) not in (3, 5, 7):
        sys.exit(__doc__)
    r = load(argv[1])
    outdir = argv[2]
    opts = dict(zip(argv[3::2], argv[4::2]))
    text = build(r)
    with open(outdir + "/figures.md", "w") as f:
        f.write(text)
    have_plot = plot(r, outdir + "/throughput.png")
    if "--doc" in opts:
        with open(opts["--doc"]) as f:
            doc = f.read()
        a, b = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        with open(opts["--doc"], "w") as f:
            f.write(doc[:a] + "\n" + text + doc[b:])
    if "--png" in opts and have_plot:
        shutil.copy(outdir + "/throughput.png", opts["--png"])
    print("report: %s/figures.md%s" % (outdir, " and throughput.png" if have_plot else ""))


if __name__ == "__main__":
    main(sys.argv)
