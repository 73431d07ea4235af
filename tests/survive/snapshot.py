#!/usr/bin/env python3
"""Print everything a file tree is, one line per path, sorted: type, inode
number, mode, owner, size, links, mtime, symlink target, every xattr (ACLs
among them) and a digest of the bytes. Two trees print the same lines
exactly when they are the same tree. Usage: snapshot.py DIR [SKIP...]"""
import hashlib
import os
import stat
import sys


def line(root, rel):
    p = os.path.join(root, rel)
    st = os.lstat(p)
    kind = stat.S_IFMT(st.st_mode)
    parts = [rel, oct(st.st_mode), str(st.st_ino), str(st.st_uid), str(st.st_gid), str(st.st_nlink),
             str(st.st_mtime_ns)]
    if stat.S_ISLNK(st.st_mode):
        parts.append("-> " + os.readlink(p))
    elif stat.S_ISREG(st.st_mode):
        parts.append(str(st.st_size))
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        parts.append(h.hexdigest()[:16])
    elif kind in (stat.S_IFCHR, stat.S_IFBLK):
        parts.append("rdev %d" % st.st_rdev)
    if not stat.S_ISLNK(st.st_mode):
        for name in sorted(os.listxattr(p, follow_symlinks=False)):
            parts.append("%s=%s" % (name, os.getxattr(p, name, follow_symlinks=False).hex()))
    return " ".join(parts)


def main():
    root, skip = sys.argv[1], set(sys.argv[2:])
    out = [line(root, ".")]
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if os.path.relpath(os.path.join(d, x), root) not in skip]
        for name in dirs + files:
            out.append(line(root, os.path.relpath(os.path.join(d, name), root)))
    print("\n".join(sorted(out)))


main()
