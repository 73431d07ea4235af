#!/usr/bin/env python3
"""A program that holds MNT/.vyre/ctl open through the daemon's death, for
sequences_test.sh. One open file for every step (a shell's `>&3` dups and
closes it, and each close flushes what is unfinished). Steps, in order,
each printing one line:
  write:TEXT   write TEXT (backslash escapes): "written" or "error: STRERROR"
  start:TEXT   the same in a thread, waited for at `join`
  join         the started write's line
  read         the reply, as one line ("" if none)
  running      wait until .vyre/stats says a sequence runs: "running"
  arm:PATH     create PATH (the kill shim's trigger): "armed"
  kill         SIGKILL the serving daemon, wait for its successor: "successor"
Every wait gives up after 60 s and says so."""
import os
import signal
import sys
import threading
import time

mnt = sys.argv[1]


def stat_of(key):
    with open(os.path.join(mnt, ".vyre/stats")) as f:
        for line in f:
            k, _, v = line.partition(" ")
            if k == key:
                return v.strip()
    return ""


def wait_for(what, cond):
    for _ in range(1200):
        if cond():
            return True
        time.sleep(0.05)
    print("not within 60 s: " + what)
    return False


def write(fd, text):
    try:
        os.write(fd, text.encode().decode("unicode_escape").encode())
        return "written"
    except OSError as e:
        return "error: " + os.strerror(e.errno)


fd = os.open(os.path.join(mnt, ".vyre/ctl"), os.O_RDWR)
started = None
for step in sys.argv[2:]:
    op, _, arg = step.partition(":")
    if op == "write":
        print(write(fd, arg))
    elif op == "start":
        started = {}
        t = threading.Thread(target=lambda: started.update(line=write(fd, arg)), daemon=True)
        t.start()
        started["thread"] = t
    elif op == "join":
        started["thread"].join(60)
        print(started.get("line", "not within 60 s: the write"))
    elif op == "read":
        print(os.read(fd, 4096).decode().rstrip("\n"))
    elif op == "running":
        if wait_for("a sequence runs", lambda: stat_of("sequences_running") == "1"):
            print("running")
    elif op == "arm":
        open(arg, "w").close()
        print("armed")
    elif op == "kill":
        old = stat_of("pid")
        os.kill(int(old), signal.SIGKILL)
        if wait_for("a successor serves", lambda: stat_of("pid") not in ("", old)):
            print("successor")
    else:
        sys.exit("ctlclient.py: no step " + op)
    sys.stdout.flush()
