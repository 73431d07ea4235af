"""Tensor-parallel ranks that keep their part of every weight resident:
rank r of N saves its tensors (after any fusing, splitting or quantising)
into DIR/rank-r-of-N/, placed on its own GPU, and at the next start
attaches them with no copy.

    # once, after loading and processing (each rank):
    vyrefs.ranks.save(model, "/mnt/gpu/llama-tp", config=model.config)
    # every later start (each rank), the model built empty for this rank:
    vyrefs.ranks.attach(model, "/mnt/gpu/llama-tp", config=model.config)

What the ranks must agree on is kept beside the tensors (rank.json): the
world size, each tensor's local shape, dtype and split (a DTensor's
placements and global shape), the GPU the rank ran on, a fingerprint of
`config` (a transformers config, or any JSON-able dict: the split's
parameters, a quantisation's), and the save's id, which rank 0 gives every
rank when torch.distributed is initialised. attach refuses, with a Fix and
nothing attached, another world size, another GPU order, another split,
another config, or ranks of two different saves.

rank and world_size come from torch.distributed when it is initialised,
else from RANK and WORLD_SIZE (torchrun sets them), else from the
arguments. The rank's GPU is torch's current device for CUDA tensors; on a
host mount (no GPU) it is LOCAL_RANK, so CI runs the same protocol.
docs/client.md has the recipe for a serving engine. check() with no model
runs without torch (torch.distributed is asked only where torch is loaded).
"""

import hashlib
import json
import os
import stat
import sys
import tempfile
import uuid

from . import dtensor as _dt
from . import owned as _owned

RECORD = "rank.json"
SAVE_ID = "save-id"  # the record's save_id alone: what the other ranks read
FORMAT = "vyrefs.ranks/1"
DEVICE_XATTR = "user.vyre.device"  # vyrefs.placement's, which needs torch


def _torch():
    """torch where this process loaded it, else None: torch.distributed
    cannot be initialised, nor a CUDA device current, without it."""
    return sys.modules.get("torch")


def _fix_save():
    return "Fix: run the job as it was saved, or save again with vyrefs.ranks.save from every rank"


def who(rank=None, world_size=None):
    """(rank, world size) of this process."""
    dist = getattr(_torch(), "distributed", None)
    if rank is None and world_size is None and dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if rank is None and "RANK" in os.environ:
        rank = int(os.environ["RANK"])
    if world_size is None and "WORLD_SIZE" in os.environ:
        world_size = int(os.environ["WORLD_SIZE"])
    if rank is None or world_size is None or not 0 <= rank < world_size:
        raise ValueError("vyrefs: rank %r of world size %r (Fix: run under torchrun or torch.distributed, or pass "
                         "rank= and world_size=)" % (rank, world_size))
    return rank, world_size


def rank_dir(where, rank, world_size):
    return os.path.join(os.fspath(where), "rank-%d-of-%d" % (rank, world_size))


def fingerprint(config):
    """sha256 of a transformers config (its full JSON) or a JSON-able dict;
    None for None."""
    if config is None:
        return None
    if hasattr(config, "to_json_string"):
        text = config.to_json_string(use_diff=False)
    elif not isinstance(config, dict) and hasattr(config, "__dict__"):
        text = json.dumps({k: v for k, v in vars(config).items() if not k.startswith("_")}, sort_keys=True, default=str)
    else:
        text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _gpu_of(tensors):
    """The mount ordinal of this rank's GPU: its tensors' CUDA device, or
    LOCAL_RANK where they are on the host."""
    for t in tensors.values():
        if t.device.type == "cuda":
            return t.device.index
    return int(os.environ.get("LOCAL_RANK", "0"))


def _current_gpu():
    torch = _torch()
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.current_device()
    return int(os.environ.get("LOCAL_RANK", "0"))


def _save_id():
    """One id for every rank of this save: rank 0's, broadcast."""
    dist = getattr(_torch(), "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    box = [uuid.uuid4().hex if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def save(model_or_state_dict, where, config=None, rank=None, world_size=None, max_shard_size="5GB"):
    """Rank r's tensors into where/rank-r-of-N/, on its GPU; returns that
    directory. An older save of this rank is replaced whole once the new
    one is written."""
    import torch
    from . import placement as _placement
    from . import torch as _vt
    model = model_or_state_dict if isinstance(model_or_state_dict, torch.nn.Module) else None
    full = model.state_dict() if model is not None else dict(model_or_state_dict)
    if config is None and model is not None:
        config = getattr(model, "config", None)
    rank, world_size = who(rank, world_size)
    save_id = _save_id()
    tensors = {name: _dt.local(t) for name, t in full.items()}
    gpu = _gpu_of(tensors)
    record = {"format": FORMAT, "rank": rank, "world_size": world_size, "gpu": gpu, "save_id": save_id,
              "fingerprint": fingerprint(config),
              "tensors": {name: {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                                 "split": _dt.split_of(full[name])} for name, t in tensors.items()}}
    final = os.path.basename(rank_dir(where, rank, world_size))
    os.makedirs(where, exist_ok=True)
    wfd = _owned.open_dir(where)
    try:
        # A fresh private name (mkdtemp: 0700), renamed into place through
        # where's fd: a name or link someone put in `where` is never
        # written through.
        for stale in os.listdir(wfd):  # an earlier save of this rank that died
            if stale.startswith("." + final + ".") and stale.endswith((".vyrefs-tmp", ".vyrefs-old")):
                _owned.remove(stale, wfd)
        tmp = tempfile.mkdtemp(prefix="." + final + ".", suffix=".vyrefs-tmp", dir=where)
        leaf = os.path.basename(tmp)
        try:
            _placement.place_dir(tmp, gpu)
            _vt.save(tensors, tmp, max_shard_size=max_shard_size)
            # 0755, nothing writable by others: what check() asks of it
            _owned.write_sealed(leaf, wfd, {RECORD: json.dumps(record, indent=1, sort_keys=True) + "\n",
                                            SAVE_ID: "%s\n" % save_id})
        except BaseException:
            _owned.remove(leaf, wfd)
            raise
        old = None
        try:
            st = os.stat(final, dir_fd=wfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            os.unlink(final, dir_fd=wfd)  # not a save's: a link or file in its place
        elif st is not None:
            old = os.path.basename(tempfile.mkdtemp(prefix="." + final + ".", suffix=".vyrefs-old", dir=where))
            os.rename(final, old, src_dir_fd=wfd, dst_dir_fd=wfd)  # over the empty directory just made
        os.rename(leaf, final, src_dir_fd=wfd, dst_dir_fd=wfd)
        if old:
            _owned.remove(old, wfd)
    finally:
        os.close(wfd)
    return os.path.join(os.fspath(where), final)


def _read(path):
    try:
        with open(os.path.join(path, RECORD)) as f:
            record = json.load(f)
        if record.get("format") != FORMAT:
            raise ValueError("format %r" % record.get("format"))
        return record
    except (OSError, ValueError) as e:
        raise ValueError("vyrefs: %s has no readable %s (%s) (%s)" % (path, RECORD, e, _fix_save())) from None


def _read_id(path):
    try:
        with open(os.path.join(path, SAVE_ID)) as f:
            text = f.read().strip()
        return None if text == "None" else text
    except OSError:
        return _read(path).get("save_id")


def _saved_worlds(where):
    found = set()
    for name in os.listdir(where) if os.path.isdir(where) else []:
        parts = name.split("-")
        if len(parts) == 4 and parts[0] == "rank" and parts[2] == "of" and parts[3].isdigit():
            found.add(int(parts[3]))
    return sorted(found)


def _tensors(model):
    """(name, tensor) of every parameter and buffer, in one walk of the
    modules (named_parameters and named_buffers walk them once each: a
    7B model's 390 modules took a few ms of a rank's restart)."""
    for prefix, mod in model.named_modules():
        dot = prefix + "." if prefix else ""
        for table in (mod._parameters, mod._buffers):
            for key, t in table.items():
                if t is not None:
                    yield dot + key, t


def _proven(path):
    """Raise, with a Fix, unless rank directory `path` proves that only this
    user or root made and can change it (vyrefs/owned.py)."""
    why = _owned.why_not(path)
    if why:
        raise ValueError("vyrefs: %s was not saved by this user or root, or another user can change it (%s): not "
                         "attached (Fix: save the ranks again with vyrefs.ranks.save, as this user, into a directory "
                         "others cannot write)" % (path, why))


def check(model, where, config=None, rank=None, world_size=None):
    """rank.json of this rank, checked against this job and `model`:
    raises ValueError with a Fix on any difference."""
    rank, world_size = who(rank, world_size)
    here = rank_dir(where, rank, world_size)
    if not os.path.isdir(here):
        worlds = _saved_worlds(where)
        raise ValueError("vyrefs: %s does not exist: %s (%s)" % (
            here, "the ranks were saved with world size %s" % " or ".join(map(str, worlds)) if worlds
            else "no rank saved there", _fix_save()))
    _proven(here)
    record = _read(here)
    ids = set()
    for r in range(world_size):
        other = rank_dir(where, r, world_size)
        if not os.path.isdir(other):
            raise ValueError("vyrefs: %s is missing: every rank of %d must have saved (%s)" % (other, world_size,
                                                                                            _fix_save()))
        if other != here:
            _proven(other)  # its save-id is read: not a link or a FIFO someone put there
        ids.add(_read_id(other))
    if len(ids) > 1:
        raise ValueError("vyrefs: the ranks in %s come from different saves (%s)" % (where, _fix_save()))
    if record.get("rank") != rank or record.get("world_size") != world_size:
        raise ValueError("vyrefs: %s holds rank %r of %r (%s)" % (here, record.get("rank"), record.get("world_size"),
                                                                  _fix_save()))
    if config is None and model is not None:
        config = getattr(model, "config", None)
    if fingerprint(config) != record.get("fingerprint"):
        raise ValueError("vyrefs: rank %d's files were saved with another config (fingerprint %s, now %s) (%s)"
                         % (rank, record.get("fingerprint"), fingerprint(config), _fix_save()))
    gpu = _current_gpu()
    try:
        placed = int(os.getxattr(here, DEVICE_XATTR))
    except (OSError, ValueError):
        placed = record.get("gpu")
    if placed != gpu:
        raise ValueError("vyrefs: rank %d's files are on GPU %s; this rank runs on GPU %d: another GPU order "
                         "(Fix: run rank %d on GPU %s, as when it saved (torch.cuda.set_device(LOCAL_RANK), the same "
                         "CUDA_VISIBLE_DEVICES), or save again)" % (rank, placed, gpu, rank, placed))
    if model is not None:
        saved = record.get("tensors", {})
        differ = []
        names = {}
        for name, t in _tensors(model):
            want = saved.get(name)
            if want is None:
                continue
            split = _dt.split_of(t)
            dtype = names.get(t.dtype) or names.setdefault(t.dtype, str(t.dtype).replace("torch.", ""))
            if split is None and want.get("split") is None and want.get("dtype") == dtype and \
                    want.get("shape") == list(t.shape):
                continue  # the common case, checked cheaply
            now = {"shape": list(_dt.local_shape(t)), "dtype": dtype, "split": split}
            if now != want:
                differ.append("%s: saved %s, now %s" % (name, want, now))
        if differ:
            raise ValueError("vyrefs: rank %d's model is split another way than its files: %s (Fix: build the model "
                             "with the split it was saved with, or save again)" % (rank, "; ".join(differ[:3])))
    return record


def attach(model, where, config=None, rank=None, world_size=None, strict=True):
    """Attach this rank's files to `model` (built empty, for this rank) with
    no copy, after check(): a DTensor parameter gets its local part back
    on its mesh. Returns vyrefs.torch.attach's AttachResult."""
    from . import torch as _vt
    check(model, where, config, rank, world_size)
    rank, world_size = who(rank, world_size)
    return _vt.attach(model, rank_dir(where, rank, world_size), strict=strict)
