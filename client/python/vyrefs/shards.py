"""A model's safetensors files in a directory: which files hold it (one
model.safetensors, or the shards model.safetensors.index.json names), and
writing them, sharded past a size, with that index.

    vyrefs.shards.files("/mnt/gpu/llama")            # [(path, names or None)]
    vyrefs.shards.save(tensors, "/mnt/gpu/llama", max_shard_size="5GB")

Tensors that share memory (tied weights: the same bytes under two names)
are written once; the other names go in the file's metadata
("vyrefs.tied": {alias: name}), and load gives them back as the same tensor.
"""

import errno
import json
import os
import re

from . import VyrefsError
from . import placement as _placement
from . import safetensors as _st

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
TIED = "vyrefs.tied"


def _fix_dir(path):
    return ("Fix: give a .safetensors file, a %s, or a directory holding one of them (save_pretrained or "
            "vyrefs.torch.save write them)" % INDEX)


def files(path):
    """[(file, names the index gives it, or None)] for a .safetensors file,
    an index, or a directory holding an index or model.safetensors."""
    path = os.fspath(path)
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, INDEX)):
            return _indexed(os.path.join(path, INDEX))
        if os.path.exists(os.path.join(path, SINGLE)):
            return [(os.path.join(path, SINGLE), None)]
        raise FileNotFoundError("vyrefs: %s holds neither %s nor %s (%s)" % (path, INDEX, SINGLE, _fix_dir(path)))
    if not os.path.exists(path):
        raise FileNotFoundError("vyrefs: no such file: %s (%s)" % (path, _fix_dir(path)))
    if path.endswith(".index.json"):
        return _indexed(path)
    return [(path, None)]


def _indexed(index):
    try:
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise ValueError("weight_map is not {name: file}")
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError("vyrefs: %s is not a safetensors index (%s) (Fix: write it again with save_pretrained or "
                         "vyrefs.torch.save)" % (index, e)) from None
    where = os.path.dirname(index)
    by_file = {}
    for name, shard in weight_map.items():
        if os.path.isabs(shard) or ".." in shard.split("/"):
            raise ValueError("vyrefs: %s names %r, outside its directory (Fix: shards sit beside the index)"
                             % (index, shard))
        by_file.setdefault(os.path.join(where, shard), set()).add(name)
    missing = [p for p in by_file if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError("vyrefs: %s names %s, which do%s not exist (Fix: copy every shard beside the index)"
                                % (index, ", ".join(missing), "es" if len(missing) == 1 else ""))
    return sorted(by_file.items())


def parse_size(size):
    """Bytes from an int or a string such as "5GB", "500MB", "2GiB"."""
    if isinstance(size, int):
        return size
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)B?\s*", str(size), re.I)
    if not m:
        raise ValueError("vyrefs: max_shard_size %r is not a size (Fix: bytes, or e.g. \"5GB\", \"500MB\")" % (size,))
    unit = (1024 if m.group(3) else 1000) ** "_KMGT".index((m.group(2) or "_").upper())
    return int(float(m.group(1)) * unit)


def unique(tensors):
    """(tensors with each memory once, {alias: name kept}); a tensor on meta
    has no bytes to write."""
    kept, aliases, seen = {}, {}, {}
    for name, t in tensors.items():
        if t.device.type == "meta":
            raise ValueError("vyrefs: %r is on the meta device, with no data to save (Fix: attach or load the "
                             "weights first)" % name)
        key = (t.device, t.data_ptr(), t.dtype, tuple(t.shape), tuple(t.stride()))
        if t.numel() and key in seen:
            aliases[name] = seen[key]
        else:
            seen[key] = name
            kept[name] = t
    return kept, aliases


def plan(tensors, max_bytes):
    """Shards: lists of names, in order, each under max_bytes (a tensor
    larger than that alone in its shard)."""
    shards, size = [[]], 0
    for name, t in tensors.items():
        n = t.numel() * t.element_size()
        if shards[-1] and size + n > max_bytes:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += n
    return shards


def _by_gpu(kept, where):
    """[(GPU or None, {name: tensor})]: tensors on several GPUs, saved into
    a directory that names none (user.vyre.device), are written a GPU's
    to a shard, each placed on its tensors' GPU (the next start maps them
    where they were: no copy). Else one group, placed as the mount places
    new files."""
    groups = {}
    for name, t in kept.items():
        groups.setdefault(t.device.index if t.device.type == "cuda" else None, {})[name] = t
    if len(groups) < 2 or None in groups or _placement.device_of(where) is not None:
        return [(None, kept)]
    return list(groups.items())


def _room(where, need):
    st = os.statvfs(where)
    free = st.f_bavail * st.f_frsize
    if need > free:
        raise VyrefsError(errno.ENOSPC, "vyrefs: the tensors take %d bytes, %s has %d free (Fix: free files there, "
                                        "or mount it with a larger budget)" % (need, where, free))


def save(tensors, where, max_shard_size="5GB", metadata=None):
    """Write `tensors` ({name: torch tensor}) into directory `where` as
    model.safetensors, or as model-0000K-of-0000N.safetensors and an index
    past max_shard_size (tensors on several GPUs: a GPU's to a shard, on
    that GPU, _by_gpu). Every file is written under a temporary name and
    renamed once all are written: on an error nothing changed."""
    os.makedirs(where, exist_ok=True)
    kept, aliases = unique(tensors)
    for name, t in kept.items():
        _st.code_of(t, name)
    total = sum(t.numel() * t.element_size() for t in kept.values())
    _room(where, total)
    shards, gpus = [], []
    for gpu, group in _by_gpu(kept, where):
        for shard in plan(group, parse_size(max_shard_size)):
            shards.append(shard)
            gpus.append(gpu)
    names = [SINGLE] if len(shards) == 1 else \
        ["model-%05d-of-%05d.safetensors" % (k + 1, len(shards)) for k in range(len(shards))]
    meta = {"format": "pt"}
    meta.update(metadata or {})
    written = []
    try:
        for shard, fname, gpu in zip(shards, names, gpus):
            tmp = os.path.join(where, ".%s.vyrefs-tmp" % fname)
            written.append(tmp)
            if gpu is not None:
                open(tmp, "wb").close()
                _placement.place_file(tmp, gpu)
            here = {a: n for a, n in aliases.items() if n in shard}
            _st.write({n: kept[n] for n in shard}, tmp, dict(meta, **({TIED: json.dumps(here)} if here else {})))
        if len(shards) > 1:
            index = {"metadata": {"total_size": total},
                     "weight_map": {n: fname for shard, fname in zip(shards, names) for n in shard}}
            tmp = os.path.join(where, ".%s.vyrefs-tmp" % INDEX)
            written.append(tmp)
            with open(tmp, "w") as f:
                json.dump(index, f, indent=2, sort_keys=True)
                f.write("\n")
    except BaseException:
        for tmp in written:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise
    for tmp, fname in zip(written, names + [INDEX]):
        os.replace(tmp, os.path.join(where, fname))
    # An older save's other form would be read in place of this one (we
    # read an index first; transformers reads model.safetensors first).
    stale = os.path.join(where, INDEX if len(shards) == 1 else SINGLE)
    if os.path.exists(stale):
        os.unlink(stale)
    return [os.path.join(where, n) for n in names]
