"""Whole PyTorch models from a vyrefs mount, with no copy.

    sd = vyrefs.torch.load_state_dict("/mnt/gpu/llama")    # {name: tensor}, views of the files
    with vyrefs.torch.empty_weights():                      # parameters on meta, buffers real
        model = MyModel()
    vyrefs.torch.attach(model, "/mnt/gpu/llama")            # parameters are the files' memory
    vyrefs.torch.save(model, "/mnt/gpu/llama-processed", max_shard_size="5GB")

A path is one .safetensors file, a model.safetensors.index.json (every
shard it names), or a directory holding one of them. The tensors are the
files' device memory (CPU memory on the host backend): processes that
attach the same files share one copy. They keep their files mapped for as
long as they live; a file replaced meanwhile (save renames over it) stays
mapped until then.
"""

import collections
import contextlib
import os

import torch

from . import dtensor as _dt
from . import safetensors as _st
from . import shards as _shards
from . import map as _map

__all__ = ["load_state_dict", "attach", "save", "empty_weights", "AttachResult", "MappedStateDict"]

class AttachResult(collections.namedtuple("AttachResult", ["missing_keys", "unexpected_keys"])):
    """What attach found: names the model has and the files lack, and the
    reverse (a pair, as torch's load_state_dict gives); `copied_bytes`:
    the bytes of the files' tensors it copied to convert their dtype (0:
    every tensor attached is the file's memory)."""
    copied_bytes = 0


class MappedStateDict(dict):
    """{name: tensor} over mapped files; `files` lists them and close()
    ends the mappings (its tensors must not be used after)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.mappings = []
        self.files = []

    def close(self):
        self.clear()
        while self.mappings:
            self.mappings.pop().close()


def load_state_dict(path):
    """Every tensor of a safetensors file, of every shard an index names, or
    of a directory's model, as zero-copy views of the files' memory, by
    name. Every file is checked before any is mapped."""
    parts = []
    for f, names in _shards.files(path):
        start, entries, meta = _st.read_header(f)
        for name, (code, _, _, _) in entries.items():
            _st.torch_dtype(code, f, name)
        lacking = sorted((names or set()) - set(entries))
        if lacking:
            raise ValueError("vyrefs: the index names %s in %s, which lacks %s (Fix: write the model again, "
                             "or copy the right shards)" % (", ".join(lacking[:5]), f, "it" if len(lacking) == 1 else "them"))
        parts.append((f, start, entries, meta))
    seen = {}
    for f, _, entries, _ in parts:
        for name in entries:
            if name in seen:
                raise ValueError("vyrefs: %r is in both %s and %s (Fix: keep one of them)" % (name, seen[name], f))
            seen[name] = f
    out = MappedStateDict()
    try:
        for f, start, entries, meta in parts:
            if not entries:
                continue
            m = _map(f)
            out.mappings.append(m)
            out.files.append(f)
            out.update(_st.views(f, m, start, entries))
            for alias, name in _tied(f, meta).items():
                if alias not in out and name in out:
                    out[alias] = out[name]
    except BaseException:
        out.close()
        raise
    return out


def _tied(path, meta):
    import json
    try:
        tied = json.loads(meta.get(_shards.TIED, "{}"))
        return {str(a): str(n) for a, n in tied.items()}
    except (ValueError, AttributeError):
        raise ValueError("vyrefs: %s: metadata %s is not {alias: name} (Fix: write the file again with "
                         "vyrefs.torch.save)" % (path, _shards.TIED)) from None


@contextlib.contextmanager
def empty_weights():
    """Modules made inside have their parameters on the meta device (no
    memory, no initialisation) and their buffers real, so buffers that no
    file holds (a rotary inv_freq) keep their values for attach."""
    register = torch.nn.Module.register_parameter

    def on_meta(module, name, param):
        register(module, name, param)
        p = module._parameters.get(name)
        if p is not None and p.device.type != "meta":
            kw = dict(p.__dict__)
            kw["requires_grad"] = p.requires_grad
            p = module._parameters[name] = type(p)(p.to("meta"), **kw)
        if p is not None:
            # Its values come from the files: transformers' initialisers
            # skip a tensor so marked (running them on meta cost a
            # converted MoE's attach 50 ms and changed nothing).
            p._is_hf_initialized = True

    torch.nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


class NamesDiffer(RuntimeError):
    """The model's names and the files' differ (strict attach)."""


class ShapesDiffer(ValueError):
    """A tensor's shape differs between the model and the files."""


def _slots(model):
    """(groups, loose): groups are lists of (name, module, key, kind) that
    hold one tensor object (tied weights are one group); loose are the
    non-persistent buffers, which no file holds."""
    groups, loose = {}, []
    for prefix, mod in model.named_modules(remove_duplicate=False):
        dot = prefix + "." if prefix else ""
        for key, p in mod._parameters.items():
            if p is not None:
                groups.setdefault(id(p), (p, []))[1].append((dot + key, mod, key, "param"))
        transient = getattr(mod, "_non_persistent_buffers_set", set())
        for key, b in mod._buffers.items():
            if b is None:
                continue
            if key in transient:
                loose.append((dot + key, mod, key, b))
            else:
                groups.setdefault(id(b), (b, []))[1].append((dot + key, mod, key, "buffer"))
    return list(groups.values()), loose


def _same(a, b):
    if a is b:
        return True
    if (a.device, a.dtype, a.shape) != (b.device, b.dtype, b.shape):
        return False
    return (a.data_ptr(), a.stride()) == (b.data_ptr(), b.stride()) or bool(torch.equal(a, b))


def _shown(names, n=10):
    names = list(names)
    return ", ".join(names[:n]) + (" and %d more" % (len(names) - n) if len(names) > n else "")


def _home_of(placed, default):
    """The device for a tensor of module `prefix`: that of the nearest
    module (itself, then its parents) that holds an attached one."""
    def home(name):
        parts = name.split(".")[:-1]
        while True:
            dev = placed.get(".".join(parts))
            if dev is not None or not parts:
                return dev or default
            parts.pop()
    return home


def _plan(model, sd, dtype):
    """What attach will do, checked whole before anything changes:
    [(slots, new tensor)], [(slots, old tensor) missing], loose buffers,
    unexpected names, the default device, and bytes of new memory."""
    groups, loose = _slots(model)
    used, done, missing, mismatch, conflict = set(), [], [], [], []
    for old, slots in groups:
        names = [s[0] for s in slots]
        have = [n for n in names if n in sd]
        if not have:
            missing.append((slots, old))
            continue
        t = sd[have[0]]
        used.update(have)
        conflict += ["%s and %s" % (have[0], n) for n in have[1:] if not _same(t, sd[n])]
        if tuple(t.shape) != _dt.local_shape(old):
            mismatch.append("%s: the model's %s, the file's %s" % (have[0], _dt.local_shape(old), tuple(t.shape)))
        done.append((slots, t, old))
    if mismatch:
        raise ShapesDiffer("vyrefs: shapes differ between the model and the files: %s (Fix: build the model from "
                         "the config the files were saved with)" % _shown(mismatch, 5))
    if conflict:
        raise ValueError("vyrefs: the model ties %s, which the files hold with different values (Fix: untie "
                         "them in the model, or save the model with vyrefs.torch.save)" % _shown(conflict, 5))
    meta_loose = [name for name, _, _, b in loose if b.device.type == "meta"]
    if meta_loose:
        raise ValueError("vyrefs: the non-persistent buffers %s are on the meta device, and no file holds them "
                         "(Fix: build the model inside vyrefs.torch.empty_weights(), which keeps buffers real, "
                         "not under torch.device('meta'))" % _shown(meta_loose))
    devices = [t.device for t in sd.values()]
    default = devices[0] if devices else torch.device("cpu")
    unexpected = [n for n in sd if n not in used]
    need = {}
    if dtype is not None:
        for _, t, _ in done:
            if t.is_floating_point() and t.dtype != dtype:
                need[t.device] = need.get(t.device, 0) + t.numel() * torch.empty((), dtype=dtype).element_size()
    placed = {}
    for slots, t, _ in done:
        for name, _, _, _ in slots:
            placed.setdefault(name.rpartition(".")[0], t.device)
    home = _home_of(placed, default)
    for slots, old in missing:
        dev = home(slots[0][0])
        need[dev] = need.get(dev, 0) + old.numel() * old.element_size()
    for name, _, _, b in loose:
        dev = home(name)
        if b.device != dev:
            need[dev] = need.get(dev, 0) + b.numel() * b.element_size()
    return done, missing, loose, unexpected, home, need


def _check_room(need):
    for dev, n in need.items():
        if dev.type != "cuda" or not n:
            continue
        free, _ = torch.cuda.mem_get_info(dev)
        if n > free:
            raise MemoryError("vyrefs: attaching needs %d bytes of new memory on %s (dtype conversions, buffers and "
                              "tensors the files lack), which has %d free (Fix: dtype=None keeps the files' dtypes "
                              "with no copy; or free memory on that GPU)" % (n, dev, free))


def attach(model, path_or_state_dict, strict=True, dtype=None):
    """Point `model`'s parameters and persistent buffers at the tensors of
    the files (a path, as load_state_dict takes, or its result), with no
    copy: a tied weight stays one parameter. Non-persistent buffers, and
    with strict=False what the files lack, go to the files' device (what
    is still on meta becomes zeros). `dtype` converts floating tensors of
    another dtype (a copy: no longer shared). Returns AttachResult
    (missing_keys, unexpected_keys, and copied_bytes: those conversions);
    with strict, either raises. On any
    error the model is unchanged and nothing that attach mapped stays
    mapped."""
    own = not isinstance(path_or_state_dict, dict)
    sd = load_state_dict(path_or_state_dict) if own else path_or_state_dict
    try:
        done, missing, loose, unexpected, home, need = _plan(model, sd, dtype)
        missing_keys = [name for slots, _ in missing for name, _, _, _ in slots]
        if strict and (missing_keys or unexpected):
            raise NamesDiffer("vyrefs: the model and the files differ: %s%s%s (Fix: build the model from the "
                               "config the files were saved with, or pass strict=False to attach what matches)" % (
                                   "missing from the files: " + _shown(missing_keys) if missing_keys else "",
                                   "; " if missing_keys and unexpected else "",
                                   "not in the model: " + _shown(unexpected) if unexpected else ""))
        _check_room(need)
        new = []  # every new tensor made before any is set: a failure leaves the model as it was
        copied = 0
        for slots, t, old in done:
            if dtype is not None and t.is_floating_point() and t.dtype != dtype:
                t = t.to(dtype)
                copied += t.numel() * t.element_size()
            new.append((slots, _dt.like(t, old)))  # a tensor-parallel rank's part: its DTensor again
        for slots, old in missing:
            dev = home(slots[0][0])
            t = torch.zeros(old.shape, dtype=old.dtype, device=dev) if old.device.type == "meta" else old.to(dev)
            new.append((slots, t))
        moved = [(mod, key, b.to(home(name))) for name, mod, key, b in loose]
    except BaseException:
        if own:
            sd.close()
        raise
    for slots, t in new:
        grad = any(isinstance(mod._parameters.get(key), torch.nn.Parameter) and mod._parameters[key].requires_grad
                   for _, mod, key, kind in slots if kind == "param")
        param = torch.nn.Parameter(t, requires_grad=grad and (t.is_floating_point() or t.is_complex()))
        for _, mod, key, kind in slots:
            if kind == "param":
                mod._parameters[key] = param
            else:
                mod._buffers[key] = t
    for mod, key, b in moved:
        mod._buffers[key] = b
    result = AttachResult(missing_keys, unexpected)
    result.copied_bytes = copied
    return result


def save(model_or_state_dict, where, max_shard_size="5GB", metadata=None):
    """Write the tensors as they are in memory now (after any processing:
    transposed, fused, quantised) into directory `where` as safetensors,
    sharded past max_shard_size with a model.safetensors.index.json, so the
    next start attaches them. Tied tensors are written once and come back
    tied. A model with a transformers config also gets its config.json
    (and generation_config.json). Returns the files written."""
    model = model_or_state_dict if isinstance(model_or_state_dict, torch.nn.Module) else None
    tensors = model.state_dict() if model is not None else dict(model_or_state_dict)
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError("vyrefs: %r is %s, not a tensor (Fix: save a model or a {name: tensor} dict)"
                            % (name, type(t).__name__))
    written = _shards.save(tensors, os.fspath(where), max_shard_size, metadata)
    config = getattr(model, "config", None)
    if hasattr(config, "save_pretrained"):
        config.save_pretrained(where)
        gen = getattr(model, "generation_config", None)
        if gen is not None and hasattr(gen, "save_pretrained"):
            gen.save_pretrained(where)
    return written
