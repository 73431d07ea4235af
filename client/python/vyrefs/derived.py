"""Converted copies kept beside their source (issue "families"): where a
framework converts a checkpoint at load (transformers 5 fuses a mixture of
experts' per-expert tensors, renames, transposes, casts the modules it
keeps in fp32), its own load runs once, and what it made is saved into
SOURCE/vyrefs-converted/, on the source's GPU, to be attached with no copy
by every later start, by any process.

    where = vyrefs.derived.ensure(source, identity, make)

The copy records what it was made from (vyrefs-converted.json): each
source file's size and mtime, and `identity` (the framework's version,
dtype, class, options). Any difference, and it is made again, never used.
Two processes converting at once make it once (a lock beside it). It is an
ordinary directory: `du` and `df` count it, `rm -r` removes it (the next
start makes it again).
"""

import fcntl
import json
import os
import shutil

from . import placement as _placement

DIR = "vyrefs-converted"
RECORD = "vyrefs-converted.json"
LOCK = ".vyrefs-converted.lock"
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


def current(source, identity):
    """SOURCE/vyrefs-converted if it was made from the source as it is now
    and with `identity`, else None."""
    where = os.path.join(source, DIR)
    rec = _read(where)
    return where if rec is not None and rec == json.loads(json.dumps(record_of(source, identity), default=str)) else None


def ensure(source, identity, make, gpu=None):
    """The converted copy of `source`: current() if it is, else made now by
    make(tmp_dir) (which writes the tensors there) under the lock, placed
    on `gpu` (a mount ordinal) when given. Returns (directory, made: bool).
    Raises PermissionError, with a Fix, where the source directory is not
    writable by this process."""
    source = os.fspath(source)
    done = current(source, identity)
    if done:
        return done, False
    try:
        lock = os.open(os.path.join(source, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise PermissionError(e.errno, "vyrefs: cannot keep a converted copy in %s: %s (Fix: let this user write "
                                       "there, or convert once as its owner: vyrefs.transformers.from_pretrained(%r))"
                              % (source, e.strerror, source)) from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process converting: wait, then use its copy
        done = current(source, identity)
        if done:
            return done, False
        where = os.path.join(source, DIR)
        tmp = os.path.join(source, "." + DIR + ".vyrefs-tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        os.mkdir(tmp)
        try:
            if gpu is not None:
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
