#!/usr/bin/env python3
"""systemd's notify socket, stood in for (tests/fs/systemd_test.sh).

    notify_listen.py ADDR MNT COUNT SECONDS

Binds a unix datagram socket at ADDR (a path, or @NAME for an abstract
one), prints "listening", then one line per message: its assignments
joined by ';', and what was true the instant it came: whether MNT is a
fuse.vyrefs mount (/proc/self/mountinfo) and whether MNT/.vyre/stats
reads (the daemon answers), as "mounted=0|1 answers=0|1". Ends after COUNT
messages, or after SECONDS (a bound against a hang: "timeout")."""
import os
import socket
import sys
import time


def mounted(mnt):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if left.split()[4] == mnt and right.split()[0] == "fuse.vyrefs":
                return True
    return False


def answers(mnt):
    try:
        with open(os.path.join(mnt, ".vyre", "stats")) as f:
            return "pid " in f.read()
    except OSError:
        return False


def main():
    addr, mnt, count, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("\0" + addr[1:] if addr.startswith("@") else addr)
    print("listening", flush=True)
    end = time.monotonic() + seconds
    for _ in range(count):
        left = end - time.monotonic()
        if left <= 0:
            print("timeout", flush=True)
            return 1
        s.settimeout(left)
        try:
            msg = s.recv(4096).decode()
        except socket.timeout:
            print("timeout", flush=True)
            return 1
        m, a = mounted(mnt), answers(mnt)
        print("%s mounted=%d answers=%d" % (";".join(msg.strip().split("\n")), m, a), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
