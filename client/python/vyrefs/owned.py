"""What a directory the client attaches must prove, and how the client
writes beside a model without following anyone's links (issue "edges",
4: a converted copy or a rank's directory planted by another user in a
shared directory was attached; a planted link made root create or
replace files elsewhere).

A directory is attached only when no other user can have put it there or
changed it: it is not a link, it and everything in it is this user's or
root's and writable by no one else (no group or other write bit; nothing
but files and directories), and its parent lets no one else replace it
(this user's or root's, and writable by no one else or sticky). Then the
path cannot be redirected between the check and the use by anyone the
loading user does not already trust (root, or themselves).

The client writes a model's copy only in a directory that is this user's
alone (`mine`): there no one else can plant a link or a name. Inside it,
it still creates through a directory fd with O_NOFOLLOW, O_EXCL and
private temporary directories (mkdtemp: 0700, a fresh name). No torch.
"""

import errno
import os
import stat

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _trusted_uid(uid):
    return uid == os.geteuid() or uid == 0


def _whose(st):
    return "uid %d's, mode %04o" % (st.st_uid, stat.S_IMODE(st.st_mode))


def mine(path):
    """Directory `path` is this user's alone: theirs, and no one else may
    write it (so no one else can put or replace a name in it)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def open_dir(path, dir_fd=None):
    """An fd of directory `path` (relative to dir_fd when given), refusing
    a link in its last component (ELOOP/ENOTDIR)."""
    return os.open(path, _DIR_FLAGS, dir_fd=dir_fd)


def why_not(path):
    """None where directory `path` proves that only this user or root made
    and can change it (see the module's text), else why not, to be said."""
    parent = os.path.dirname(os.path.abspath(path))
    try:
        pst = os.stat(parent)
    except OSError as e:
        return "%s: %s" % (parent, e.strerror)
    if not _trusted_uid(pst.st_uid) or (pst.st_mode & 0o022 and not pst.st_mode & stat.S_ISVTX):
        return "%s is %s: another user can replace what is in it" % (parent, _whose(pst))
    try:
        fd = open_dir(path)
    except OSError as e:
        return "%s: %s" % (path, "a link, or not a directory" if e.errno in (errno.ELOOP, errno.ENOTDIR) else e.strerror)
    try:
        return _why_not_fd(fd, path)
    finally:
        os.close(fd)


def _held(st):
    return _trusted_uid(st.st_uid) and not st.st_mode & 0o022


def _why_not_fd(fd, shown):
    st = os.fstat(fd)
    if not _held(st):
        return "%s is %s" % (shown, _whose(st))
    with os.scandir(fd) as entries:
        for e in entries:
            name = os.path.join(shown, e.name)
            est = e.stat(follow_symlinks=False)  # fstatat on fd: no path walked again
            if stat.S_ISDIR(est.st_mode):
                sub = open_dir(e.name, dir_fd=fd)
                try:
                    why = _why_not_fd(sub, name)
                finally:
                    os.close(sub)
                if why:
                    return why
            elif not stat.S_ISREG(est.st_mode):
                return "%s is not a plain file" % name
            elif not _held(est):
                return "%s is %s" % (name, _whose(est))
    return None


def seal(fd, mode=0o755):
    """Directory fd as it is shared: `mode`, and its files and directories
    writable by no one else (a writer under umask 002 made them group
    writable: a later check would refuse them)."""
    os.fchmod(fd, mode)
    with os.scandir(fd) as entries:
        for e in entries:
            est = e.stat(follow_symlinks=False)
            if stat.S_ISDIR(est.st_mode):
                sub = open_dir(e.name, dir_fd=fd)
                try:
                    seal(sub, stat.S_IMODE(est.st_mode) & ~0o022)
                finally:
                    os.close(sub)
            elif stat.S_ISREG(est.st_mode) and est.st_mode & 0o022:
                os.chmod(e.name, stat.S_IMODE(est.st_mode) & ~0o022, dir_fd=fd, follow_symlinks=False)


def remove(name, dir_fd):
    """Remove `name` in dir_fd, whatever it is, following no link."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        sub = open_dir(name, dir_fd=dir_fd)
        try:
            for e in os.listdir(sub):  # through the fd: a link inside is removed, never followed
                remove(e, sub)
        finally:
            os.close(sub)
        os.rmdir(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)


def write_new(dir_fd, name, text):
    """A new file `name` in dir_fd holding `text`: O_EXCL, so never
    through a link or over a file someone put there."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def write_sealed(leaf, dir_fd, files):
    """The files (name -> text, in order) written new into directory `leaf`
    of `dir_fd`, then the directory sealed (0755, nothing writable by
    others): how a kept record's directory is finished."""
    fd = open_dir(leaf, dir_fd=dir_fd)
    try:
        for name, text in files.items():
            write_new(fd, name, text)
        seal(fd)
    finally:
        os.close(fd)


def read_text(dir_fd, name):
    """The text of file `name` in dir_fd, not through a link."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(fd) as f:
        return f.read()
