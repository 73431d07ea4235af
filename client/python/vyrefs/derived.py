"""Converted copies kept beside their source (issue "families"): where a
framework converts a checkpoint at load (transformers 5 fuses a mixture of
experts' per-expert tensors, renames, transposes, casts the modules it
keeps in fp32), its own load runs once, and what it made is saved into
SOURCE/vyrefs-converted/, on the source's GPU (GPUs), to be attached with no copy
by every later start, by any process.

    where = vyrefs.derived.ensure(source, identity, make)

A program's own conversion (its loader's renames, fusing, transposes) is
kept the same way: vyrefs.derived.keep(source, convert, identity, name)
runs convert(state_dict) on the source's mapped tensors once, keeps the
result in SOURCE/vyrefs-converted-NAME/ and gives it back, mapped.

The copy records what it was made from (vyrefs-converted.json): each
source file's size and mtime, and `identity` (the framework's version,
dtype, class, options). Any difference, and it is made again, never used.
Two processes converting at once make it once (a lock beside it). It is an
ordinary directory: `du` and `df` count it, `rm -r` removes it (the next
start makes it again).

A copy is attached only where no other user can have made or changed it
(vyrefs/owned.py: it and its files are this user's or root's, writable by
no one else, in a directory others cannot replace it in): one another user
planted in a shared directory is said and not used. The copy is written
beside the source where the source directory is this user's alone, else
in MOUNT/.vyrefs-uid-UID/NAME-HASH/ (0700, this user's), never following
a link: a fresh private temporary directory, renamed through a directory fd.

Only keep() and save() need torch: current() and ensure() run without it.
"""

import errno
import fcntl
import hashlib
import json
import os
import stat
import tempfile
import warnings

from . import owned as _owned

DIR = "vyrefs-converted"
RECORD = "vyrefs-converted.json"
FORMAT = "vyrefs.derived/1"


def _stamp(path):
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]


def source_files(source):
    """The files of `source` a conversion reads, by name: its weights
    (*.safetensors), their index and config.json (a tokenizer written
    later does not make the copy stale)."""
    out = {}
    for name in sorted(os.listdir(source)):
        full = os.path.join(source, name)
        if name.startswith(".") or not os.path.isfile(full):
            continue
        if name.endswith(".safetensors") or name.endswith(".safetensors.index.json") or name == "config.json":
            out[name] = _stamp(full)
    return out


def record_of(source, identity):
    return {"format": FORMAT, "source": source_files(source), "identity": identity}


PRIVATE = ".vyrefs-uid-%d"  # at the top of the mount: this user's copies of sources not theirs alone


def _mount_root(path):
    """The top of the file system `path` is on."""
    p = os.path.realpath(path)
    dev = os.stat(p).st_dev
    while p != "/":
        up = os.path.dirname(p)
        if os.stat(up).st_dev != dev:
            break
        p = up
    return p


def _private_key(source, root):
    """SOURCE's directory among this user's copies: its name and a hash
    of its path in the mount."""
    rel = os.path.relpath(os.path.realpath(source), root)
    return "%s-%s" % (os.path.basename(os.path.realpath(source)) or "root",
                      hashlib.sha256(rel.encode()).hexdigest()[:16])


def _fix_mine(source):
    return ("Fix: make the directory this user's alone (chmod go-w %s, where it is theirs), convert in a directory "
            "only this user can write (copy the model there), or once as the directory's owner: "
            "vyrefs.transformers.from_pretrained(%r)" % (source, source))


def _private(source, create):
    """MOUNT/.vyrefs-uid-UID/KEY, this user's copies of `source` (its top
    0700, this user's: no one else can put or change a name in it); None
    where not made yet (create False). Raises PermissionError with a Fix
    where it cannot be made."""
    root = _mount_root(source)
    if not os.path.isdir(os.path.join(root, ".vyre")):
        if not create:
            return None
        raise PermissionError(errno.EACCES, "vyrefs: cannot keep a converted copy of %s: another user can write it, "
                                            "and it is on no vyrefs mount to keep this user's own copy in (%s)"
                              % (source, _fix_mine(source)))
    top = PRIVATE % os.geteuid()
    shown = os.path.join(root, top)
    rfd = _owned.open_dir(root)
    try:
        if create:
            try:
                os.mkdir(top, 0o700, dir_fd=rfd)
            except FileExistsError:
                pass
            except OSError as e:
                raise PermissionError(e.errno, "vyrefs: cannot keep a converted copy of %s: another user can write "
                                               "it, and %s cannot be made: %s (%s, or let this user write %s)"
                                      % (source, shown, e.strerror, _fix_mine(source), root)) from None
        try:
            tfd = _owned.open_dir(top, dir_fd=rfd)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise PermissionError(e.errno, "vyrefs: %s is not this user's private directory: %s (Fix: remove it, "
                                           "rm %s; it is made again, 0700)" % (shown, e.strerror, shown)) from None
    finally:
        os.close(rfd)
    try:
        st = os.fstat(tfd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise PermissionError(errno.EACCES, "vyrefs: %s is not this user's private directory (uid %d's, mode %04o)"
                                                ": refused (Fix: remove it, rm -r %s; it is made again, 0700)"
                                  % (shown, st.st_uid, stat.S_IMODE(st.st_mode), shown))
        key = _private_key(source, root)
        if create:
            try:
                os.mkdir(key, 0o700, dir_fd=tfd)
            except FileExistsError:
                pass
        return os.path.join(shown, key)
    finally:
        os.close(tfd)


_said = set()  # (copy, why): said once a process


def _proven(where):
    """Directory `where` is a copy this user or root made and no one else
    can change (vyrefs/owned.py); one that is not is said and not used."""
    if not os.path.lexists(where):
        return False
    why = _owned.why_not(where)
    if why and (where, why) not in _said:
        _said.add((where, why))
        warnings.warn("vyrefs: %s is not used: %s (Fix: remove it; a copy is made where only this user can write)"
                      % (where, why), stacklevel=3)
    return why is None


def _read(where):
    try:
        fd = _owned.open_dir(where)
        try:
            return json.loads(_owned.read_text(fd, RECORD))
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return None


def current(source, identity, name=DIR):
    """The copy NAME (vyrefs-converted) of `source` if it was made from the
    source as it is now and with `identity`, by this user or root, and no
    one else can change it, else None: SOURCE/NAME, else this user's own
    (MOUNT/.vyrefs-uid-UID/..., made where the source is not theirs alone)."""
    want = None
    for home in (source, None):
        if home is None:
            try:
                home = _private(source, create=False)
            except OSError:  # none, or not this user's: ensure() says so where it would write there
                return None
        where = home and os.path.join(home, name)
        if where and _proven(where):
            rec = _read(where)
            if want is None:
                want = json.loads(json.dumps(record_of(source, identity), default=str))
            if rec is not None and rec == want:
                return where
    return None


def ensure(source, identity, make, gpu=None, name=DIR):
    """The converted copy of `source`: current() if it is, else made now by
    make(tmp_dir) (which writes the tensors there) under the lock, placed
    on `gpu` (a mount ordinal) when given (else where make's save puts its
    files). Made beside the source where the source directory is this
    user's alone, else in this user's own directory at the top of the
    mount (no one else can put a link or a name where it writes).
    Returns (directory, made: bool). Raises PermissionError, with a Fix,
    where neither can be written by this process."""
    source = os.fspath(source)
    done = current(source, identity, name)
    if done:
        return done, False
    home = source if _owned.mine(source) else _private(source, create=True)
    hfd = _owned.open_dir(home)
    try:
        try:
            lock = os.open("." + name + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                           dir_fd=hfd)
        except OSError as e:
            raise PermissionError(e.errno, "vyrefs: cannot keep a converted copy in %s: %s (%s)"
                                  % (home, e.strerror, _fix_mine(source))) from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process converting: wait, then use its copy
            done = current(source, identity, name)
            if done:
                return done, False
            return os.path.join(home, _make(home, hfd, source, identity, make, gpu, name)), True
        finally:
            os.close(lock)
    finally:
        os.close(hfd)


def _make(home, hfd, source, identity, make, gpu, name):
    """Under the lock: make(tmp) into a fresh private directory in `home`
    (hfd), its record written, then renamed to `name`. Returns name."""
    for stale in os.listdir(hfd):  # a conversion that died: nobody else converts now
        if stale.startswith("." + name + ".") and stale.endswith(".vyrefs-tmp"):
            _owned.remove(stale, hfd)
    tmp = tempfile.mkdtemp(prefix="." + name + ".", suffix=".vyrefs-tmp", dir=home)  # 0700, a new name
    leaf = os.path.basename(tmp)
    try:
        if gpu is not None:
            from . import placement as _placement
            _placement.place_dir(tmp, gpu)
        record = record_of(source, identity)
        make(tmp)
        # 0755, nothing writable by others: what current() asks of it
        _owned.write_sealed(leaf, hfd, {RECORD: json.dumps(record, indent=1, sort_keys=True, default=str) + "\n"})
    except BaseException:
        _owned.remove(leaf, hfd)
        raise
    _owned.remove(name, hfd)  # stale: nobody uses it (attached copies keep their memory)
    os.rename(leaf, name, src_dir_fd=hfd, dst_dir_fd=hfd)
    return name


def gpu_of(sd):
    """The GPU (ordinal) of a mapped state dict's first tensor, or None."""
    devices = sorted({t.device for t in sd.values()}, key=str)
    return devices[0].index if devices and devices[0].type == "cuda" else None


def one_gpu(sd):
    """gpu_of(sd) where all of sd is on that GPU, else None: a copy of a
    state dict on several GPUs is saved a GPU's tensors to a file, each
    file on its tensors' GPU (vyrefs/shards.py)."""
    return gpu_of(sd) if len({t.device for t in sd.values()}) == 1 else None


def save(what, tmp, gpu):
    """Save a conversion's result (a model or {name: tensor}) into `tmp`,
    the copy being made. `gpu` given (the source on one GPU): tmp is placed
    there already. Else the source is on several GPUs: a result on one GPU
    goes to a directory placed on it; a result on several is written a
    GPU's to a file on that GPU (vyrefs/shards.py), with no setting tmp
    took from the source's directory gathering them on one."""
    from . import placement as _placement
    from . import torch as _vt
    if gpu is None:
        tensors = what.state_dict() if hasattr(what, "state_dict") else what
        gpus = {t.device.index for t in tensors.values() if t.device.type == "cuda"}
        try:
            if len(gpus) == 1:
                _placement.place_dir(tmp, gpus.pop())
            elif gpus:
                os.removexattr(tmp, _placement.DEVICE_XATTR)
        except OSError as e:
            if e.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EINVAL):  # none set; not a mount's, or its device
                raise
    _vt.save(what, tmp)


def keep(source, convert, identity, name):
    """A program's own conversion of directory `source`'s tensors, kept
    beside them: convert(state_dict) -> {name: tensor} runs once, on the
    source's mapped tensors (on their GPU), and what it returns is saved
    into SOURCE/vyrefs-converted-NAME/ (a loader's own name: `ls` shows
    whose it is; transformers' is vyrefs-converted) and returned mapped (no
    copy). Every later call, by any process, maps that copy without
    converting while the source files and `identity` (JSON-able: the
    loader's version, dtype, options) are what they were; else it converts
    again."""
    source = os.fspath(source)
    if not name or "/" in name or name.startswith("."):
        raise ValueError("vyrefs: a converted copy's name is one word, not %r (Fix: name it after your loader, "
                         "e.g. name='myengine')" % (name,))
    name = DIR + "-" + name
    from . import torch as _vt
    done = current(source, identity, name)
    if not done:
        sd = _vt.load_state_dict(source)
        try:
            gpu = one_gpu(sd)
            done, _ = ensure(source, identity, lambda tmp: save(convert(sd), tmp, gpu), gpu, name)
        finally:
            sd.close()
    return _vt.load_state_dict(done)
