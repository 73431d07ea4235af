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

Only keep() and save() need torch: current() and ensure() run without it.
"""

import errno
import fcntl
import json
import os
import shutil

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


def _read(where):
    try:
        with open(os.path.join(where, RECORD)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def current(source, identity, name=DIR):
    """SOURCE/NAME (vyrefs-converted) if it was made from the source as it
    is now and with `identity`, else None."""
    where = os.path.join(source, name)
    rec = _read(where)
    return where if rec is not None and rec == json.loads(json.dumps(record_of(source, identity), default=str)) else None


def ensure(source, identity, make, gpu=None, name=DIR):
    """The converted copy of `source`: current() if it is, else made now by
    make(tmp_dir) (which writes the tensors there) under the lock, placed
    on `gpu` (a mount ordinal) when given (else where make's save puts its
    files). Returns (directory, made: bool).
    Raises PermissionError, with a Fix, where the source directory is not
    writable by this process."""
    source = os.fspath(source)
    done = current(source, identity, name)
    if done:
        return done, False
    try:
        lock = os.open(os.path.join(source, "." + name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise PermissionError(e.errno, "vyrefs: cannot keep a converted copy in %s: %s (Fix: let this user write "
                                       "there, or convert once as its owner: vyrefs.transformers.from_pretrained(%r))"
                              % (source, e.strerror, source)) from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process converting: wait, then use its copy
        done = current(source, identity, name)
        if done:
            return done, False
        where = os.path.join(source, name)
        tmp = os.path.join(source, "." + name + ".vyrefs-tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        os.mkdir(tmp)
        try:
            if gpu is not None:
                from . import placement as _placement
                _placement.place_dir(tmp, gpu)
            record = record_of(source, identity)
            make(tmp)
            with open(os.path.join(tmp, RECORD), "w") as f:
                json.dump(record, f, indent=1, sort_keys=True, default=str)
                f.write("\n")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        shutil.rmtree(where, ignore_errors=True)  # stale: nobody uses it (attached copies keep their memory)
        os.rename(tmp, where)
        return where, True
    finally:
        os.close(lock)


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
