#!/usr/bin/env python3
"""The takeover phase of bench/run.sh (issue "survive", docs/survive.md).

    takeover_bench.py MNT LABEL FILES BYTES REPS [SMALL]

MNT is a fresh survive=on mount. The bench fills it with FILES files of
SMALL bytes (64 by default; 1,000 a directory) and BYTES resident in files of at most 1 GiB
(fallocate: memory the device holds, no bytes copied), walks the whole
namespace once as a baseline (every file opened, stat'd and closed: each
open reaches the daemon, whatever the kernel caches), then REPS times
SIGKILLs the serving daemon (once its standby, if any, is ready) and
measures, from just before the kill:

  first_answer_ms  to the first request answered (a read of .vyre/stats,
                   by the successor: its pid differs)
  whole_ms         to the end of the same walk of the whole namespace
  daemon_us        the successor's own figure (.vyre/stats takeover_us:
                   from the keeper seeing the death to its first answer)
  daemon_STEP_us   its steps: start (the keeper's fork and exec), devices
                   (the driver's start), replay (names and memory)
  second_kill_ms   a kill of that successor as soon as it answers (its
                   standby not ready yet), to the next one's first answer

Each figure is the median over REPS; walk_ms is the baseline walk. Lines
are `takeover.LABEL.KEY VALUE`, as bench/run.sh's results.txt wants.
"""
import os
import signal
import statistics
import sys
import time

GIB = 1 << 30
# The successor's own figure and its steps (.vyre/stats takeover_*_us).
STEPS = ("_start", "_devices", "_replay")


def stats(mnt):
    with open(os.path.join(mnt, ".vyre", "stats")) as f:
        out = {}
        for line in f:
            k, _, v = line.partition(" ")
            out[k] = v.strip()
        return out


def populate(mnt, files, resident, small):
    paths = []
    for i in range(files):
        d = os.path.join(mnt, "t", "d%d" % (i // 1000))
        if i % 1000 == 0:
            os.makedirs(d, exist_ok=True)
        p = os.path.join(d, "f%d" % i)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, (b"%063d\n" % i)[:small])
        os.close(fd)
        paths.append(p)
    left, j = resident, 0
    while left > 0:
        p = os.path.join(mnt, "t", "big%d" % j)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
        os.posix_fallocate(fd, 0, min(left, GIB))
        os.close(fd)
        paths.append(p)
        left -= min(left, GIB)
        j += 1
    return paths


def walk(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.fstat(fd)
        os.close(fd)


def standby_ready(mnt):
    """Waits for the keeper's standby (survive_standby=on): its devices open,
    as after any quiet spell; off, there is none to wait for."""
    with open(os.path.join(mnt, ".vyre", "config")) as f:
        if "survive_standby = off\n" in f.read():
            return
    end = time.monotonic() + 60
    while int(stats(mnt).get("standby_pid", "0")) == 0:
        if time.monotonic() > end:
            sys.exit("takeover_bench: no standby within 60 s")
        time.sleep(0.01)


def one_kill(mnt, paths, wait_standby=True):
    if wait_standby:
        standby_ready(mnt)
    old = int(stats(mnt)["pid"])
    t0 = time.monotonic()
    os.kill(old, signal.SIGKILL)
    while True:
        s = stats(mnt)  # waits while no daemon serves
        if int(s["pid"]) != old:
            break
    t1 = time.monotonic()
    if not paths:
        return (t1 - t0) * 1e3, 0, {}
    walk(paths)
    t2 = time.monotonic()
    return (t1 - t0) * 1e3, (t2 - t0) * 1e3, {k: int(s["takeover%s_us" % k]) for k in ("",) + STEPS}


def main():
    mnt, label, files, resident, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    small = int(sys.argv[6]) if len(sys.argv) > 6 else 64
    if not 0 <= small <= 64:
        sys.exit("takeover_bench: SMALL is 0 to 64 bytes")
    paths = populate(mnt, files, resident, small)
    before = int(stats(mnt)["resident_bytes"])
    if before < resident:
        sys.exit("takeover_bench: %d resident, %d asked" % (before, resident))
    walk(paths)  # warm
    t = time.monotonic()
    walk(paths)
    walk_ms = (time.monotonic() - t) * 1e3
    first, whole, steps = [], [], []
    for _ in range(reps):
        a, b, c = one_kill(mnt, paths)
        first.append(a)
        whole.append(b)
        steps.append(c)
    second = []
    for _ in range(reps):
        one_kill(mnt, [])
        second.append(one_kill(mnt, [], wait_standby=False)[0])
    s = stats(mnt)
    if int(s["resident_bytes"]) != before:
        sys.exit("takeover_bench: %s resident after the kills, %d before" % (s["resident_bytes"], before))
    key = "takeover.%s." % label
    print(key + "files %d" % files)
    print(key + "file_bytes %d" % small)
    print(key + "resident_bytes %s" % s["resident_bytes"])
    print(key + "walk_ms %.1f" % walk_ms)
    print(key + "first_answer_ms %.1f" % statistics.median(first))
    print(key + "whole_ms %.1f" % statistics.median(whole))
    print(key + "daemon_us %d" % statistics.median(s[""] for s in steps))
    for k in STEPS:
        print(key + "daemon%s_us %d" % (k, statistics.median(s[k] for s in steps)))
    print(key + "second_kill_ms %.1f" % statistics.median(second))
    print(key + "takeovers %s" % s["takeovers"])


if __name__ == "__main__":
    main()
