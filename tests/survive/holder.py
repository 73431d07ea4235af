#!/usr/bin/env python3
"""A program that holds files open across a daemon's death (handles_test.sh).

holder.py MODE MOUNT TEMPDIR: it opens what MODE says, uses it a little,
creates TEMPDIR/ready, waits (at most 60 s) for TEMPDIR/go, then goes on
with the same descriptors and checks every byte and name. It prints "ok"
and exits 0, or prints what went wrong and exits 1. It writes only inside
MOUNT (and the two marker files in TEMPDIR).

Modes:
  files     a 2 MiB file open read-write and a directory of 600 entries
            half read; after: the rest of the file read, a write read back,
            the directory read to its end (each name once, none missing)
  unlinked  a 3 MiB file written, then unlinked while open; after: every
            byte read back through the descriptor, then closed
  tmpfile   a 3 MiB O_TMPFILE file written; after: linked in by name
            (linkat through /proc/self/fd) and every byte read by that name
  paths     a/b/f1 .. f300 made and held by O_PATH fds (so the kernel keeps
            every inode, whoever drops the caches); after: closed
"""
import hashlib
import os
import sys
import time


def pattern(n, seed):
    out = bytearray()
    block = 0
    while len(out) < n:
        out += hashlib.sha256(b"%d:%d" % (seed, block)).digest()
        block += 1
    return bytes(out[:n])


def wait_go(tmp):
    open(os.path.join(tmp, "ready"), "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(tmp, "go")):
        if time.monotonic() > deadline:
            raise SystemExit("holder: no go within 60 s")
        time.sleep(0.02)


def read_all(fd, n, off=0):
    out = bytearray()
    while len(out) < n:
        b = os.pread(fd, n - len(out), off + len(out))
        if not b:
            break
        out += b
    return bytes(out)


def files(mnt, tmp):
    size = 2 << 20
    data = pattern(size, 1)
    fd = os.open(os.path.join(mnt, "f"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    if os.pread(fd, 4096, 0) != data[:4096]:
        return "the first page before the death"
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    names = {"entry-%04d-%s" % (i, "x" * 60) for i in range(600)}
    for n in names:
        os.close(os.open(os.path.join(d, n), os.O_CREAT | os.O_WRONLY, 0o644))
    it = os.scandir(d)
    seen = [next(it).name for _ in range(20)]
    wait_go(tmp)
    # The far end of the file: never read before, so not in the page cache.
    if read_all(fd, size - (1 << 20), 1 << 20) != data[1 << 20:]:
        return "the file's second MiB after the death"
    if os.pwrite(fd, b"after the death", 100) != 15 or os.pread(fd, 15, 100) != b"after the death":
        return "a write through the old descriptor"
    if os.fstat(fd).st_size != size:
        return "fstat's size"
    os.close(fd)
    seen += [e.name for e in it]
    it.close()
    if len(seen) != len(set(seen)):
        return "the directory repeated names: %d read, %d distinct" % (len(seen), len(set(seen)))
    if set(seen) != names:
        return "the directory's names: %d missing, %d extra" % (len(names - set(seen)), len(set(seen) - names))
    return None


def unlinked(mnt, tmp):
    size = 3 << 20
    data = pattern(size, 2)
    path = os.path.join(mnt, "gone")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.unlink(path)
    wait_go(tmp)
    got = read_all(fd, size)
    if got != data:
        return "the unlinked file's bytes: %d read, first difference at %s" % (
            len(got), next((i for i in range(min(len(got), size)) if got[i] != data[i]), "the end"))
    if os.fstat(fd).st_nlink != 0:
        return "the unlinked file has links"
    os.close(fd)
    return None


def tmpfile(mnt, tmp):
    size = 3 << 20
    data = pattern(size, 3)
    fd = os.open(mnt, os.O_TMPFILE | os.O_RDWR, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    wait_go(tmp)
    named = os.path.join(mnt, "named")
    # linkat(AT_FDCWD, "/proc/self/fd/N", AT_FDCWD, named, AT_SYMLINK_FOLLOW):
    # os.link calls link(2), which would link the magic link itself.
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.linkat(-100, b"/proc/self/fd/%d" % fd, -100, named.encode(), 0x400) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), named)
    os.close(fd)
    with open(named, "rb") as f:
        got = f.read()
    if got != data:
        return "the linked file's bytes: %d read" % len(got)
    return None


def paths(mnt, tmp):
    d = os.path.join(mnt, "a", "b")
    os.makedirs(d)
    fds = []
    for i in range(1, 301):
        p = os.path.join(d, "f%d" % i)
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
        fds.append(os.open(p, os.O_PATH))
    wait_go(tmp)
    for fd in fds:
        os.close(fd)
    return None


def main():
    mode, mnt, tmp = sys.argv[1:4]
    try:
        why = {"files": files, "unlinked": unlinked, "tmpfile": tmpfile, "paths": paths}[mode](mnt, tmp)
    except OSError as e:
        why = "%s: %s" % (type(e).__name__, e)
    print("ok" if why is None else "holder: " + why, flush=True)
    return 0 if why is None else 1


if __name__ == "__main__":
    sys.exit(main())
