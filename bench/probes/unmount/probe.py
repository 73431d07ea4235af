#!/usr/bin/env python3
"""Where a clean unmount's time goes (issue 67, part 2).

Mounts vyrefs in the foreground with VYREFS_TRACE_UNMOUNT=1 (each process
logs `teardown t=MONOTONIC_US STEP` at each step: daemon/log.h, the
keeper's step()), writes FILES files, then unmounts and waits for the
process it started (with survive=on, the keeper) to exit. Per round: the
time from just before `fusermount3 -u` to each step, and to the exit as
waitpid sees it. PARALLEL mounts do it side by side (the suites' load).

    bench/probes/unmount/probe.py [--backend host|cuda] [--survive on|off]
        [--rounds N] [--parallel P] [--files F] [--out DIR]

Prints a table (median and max in ms per step) and writes every round's
steps to DIR/rounds.csv (DIR: $OUT, else a fresh /tmp directory).
Run from the repository root after `make`; as root or as a user that
may mount FUSE.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

STEP = re.compile(r"^(vyrefs|vyrefs-keeper): teardown t=(\d+) (.*)$")


def one_round(args, idx, rows, lock):
    mnt = tempfile.mkdtemp(prefix="vyrefs-unmount-probe.")
    log = os.path.join(args.out, "mount-%d.log" % idx)
    opts = "backend=%s,survive=%s" % (args.backend, args.survive)
    if args.backend == "host":
        opts += ",host_memory=1G"
    elif args.parallel > 1:
        opts += ",resident_budget=4G"
    env = dict(os.environ, VYREFS_TRACE_UNMOUNT="1")
    with open(log, "w") as lf:
        p = subprocess.Popen([args.vyrefs, "-f", "-o", opts, mnt], stderr=lf, env=env)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(mnt, ".vyre", "stats")):
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mount %d failed: see %s" % (idx, log))
            time.sleep(0.02)
        for i in range(args.files):
            with open(os.path.join(mnt, "f%d" % i), "wb") as f:
                f.write(os.urandom(args.file_bytes))
        # EBUSY: another process looks into the mount (a busy machine's
        # find or ls): counted, and tried again; the time runs from the
        # call that unmounted.
        for busy in range(100):
            t0 = time.monotonic_ns() // 1000
            if subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL).returncode == 0:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("mount %d: fusermount3 -u %s failed 100 times" % (idx, mnt))
        t_umount = time.monotonic_ns() // 1000
        rc = p.wait(timeout=600)
        t_exit = time.monotonic_ns() // 1000
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        try:
            os.rmdir(mnt)
        except OSError:
            pass
    steps = [("umount returned", t_umount)]
    with open(log) as lf:
        for line in lf:
            m = STEP.match(line.strip())
            if m:
                who = "keeper" if m.group(1) == "vyrefs-keeper" else "daemon"
                steps.append(("%s: %s" % (who, m.group(3)), int(m.group(2))))
    steps.append(("exit seen (waitpid)", t_exit))
    with lock:
        rows.append((idx, rc, busy, [(name, (t - t0) / 1000.0) for name, t in steps]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="host")
    ap.add_argument("--survive", default="on")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--file-bytes", type=int, default=1 << 20)
    ap.add_argument("--vyrefs", default="build/vyrefs")
    ap.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp(prefix="vyrefs-unmount-probe."))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows, lock = [], threading.Lock()
    for r in range(args.rounds):
        ts = [threading.Thread(target=one_round, args=(args, r * args.parallel + j, rows, lock))
              for j in range(args.parallel)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    order, by = [], {}
    with open(os.path.join(args.out, "rounds.csv"), "w") as csv:
        csv.write("mount,status,step,ms_after_umount_call\n")
        for idx, rc, _, steps in sorted(rows):
            for name, ms in steps:
                csv.write('%d,%d,"%s",%.3f\n' % (idx, rc, name, ms))
                if name not in by:
                    order.append(name)
                    by[name] = []
                by[name].append(ms)
    bad = [idx for idx, rc, _, _ in rows if rc != 0]
    busy = sum(b for _, _, b, _ in rows)
    title = "backend=%s survive=%s: %d unmounts (%d side by side), %d files of %d bytes each; " \
            "ms after the fusermount3 -u call" % (args.backend, args.survive, len(rows), args.parallel,
                                                  args.files, args.file_bytes)
    out = [title, "%-46s %9s %9s %6s" % ("step", "median", "max", "n")]
    for name in sorted(order, key=lambda n: statistics.median(by[n])):
        v = by[name]
        out.append("%-46s %9.1f %9.1f %6d" % (name, statistics.median(v), max(v), len(v)))
    if busy:
        out.append("fusermount3 -u said EBUSY %d times (tried again)" % busy)
    if bad:
        out.append("exit status not 0 for mounts %s (their logs: %s/mount-N.log)" % (bad, args.out))
    text = "\n".join(out)
    print(text)
    with open(os.path.join(args.out, "summary-%s-%s-p%d.txt" % (args.backend, args.survive, args.parallel)), "w") as f:
        f.write(text + "\n")
    return 1 if bad or len(rows) != args.rounds * args.parallel else 0


if __name__ == "__main__":
    sys.exit(main())
