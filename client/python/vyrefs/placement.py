"""Where each part of an attached model runs, from where its weights are.

A mapped tensor lives on its file's GPU. A model whose files sit on
several GPUs runs once each of its units (a module the model says must not
be split, e.g. a decoder layer, else a module holding tensors of its own)
has one home:

    homes = vyrefs.placement.homes(model)            # {unit: device}
    copied = vyrefs.placement.gather(model, homes)   # bytes copied
    vyrefs.placement.dispatch(model, homes)          # hooks between GPUs

A unit's home is the device that holds most of its bytes, or the one a
device_map dict names for it; only its tensors elsewhere are copied there
(0 bytes when the files kept each layer on one GPU). Across several GPUs
accelerate's hooks move the activations, as from_pretrained's device_map
does. docs/devices.md says where a mount puts a model's files.
"""

import errno
import os
import warnings

import torch

DEVICE_XATTR = "user.vyre.device"


def place_dir(path, gpu):
    """Directory `path` of a vyrefs mount: its new files go to device
    `gpu` (its user.vyre.device; they never spill elsewhere)."""
    _set(path, gpu)


def place_file(path, gpu):
    """An empty file `path`: on a vyrefs mount with device `gpu`, its bytes
    will go there, pinned (set even where the mount would put it: a file
    placed by default may spill to another device as it grows); elsewhere
    (no user.vyre.device: another file system; or a mount without that
    device) it is left where it is."""
    if device_of(path) is None:
        return
    try:
        _set(path, gpu)
    except OSError as e:
        if e.errno != errno.EINVAL:  # EINVAL: not a device of this mount
            raise


def _set(path, gpu):
    from . import VyrefsError
    try:
        os.setxattr(path, DEVICE_XATTR, str(gpu).encode())
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EPERM):
            raise VyrefsError(e.errno, "vyrefs: %s is not in a vyrefs mount (Fix: use a directory of a vyrefs "
                                       "mount)" % path) from None
        raise VyrefsError(e.errno, "vyrefs: cannot place %s on device %s: %s (Fix: mount every GPU it needs, "
                                   "e.g. -o devices=all)" % (path, gpu, e.strerror)) from None


def device_of(path):
    """The mount ordinal a file or directory of a vyrefs mount is on, or
    None (not a vyrefs mount, or a directory without a setting)."""
    try:
        return int(os.getxattr(path, DEVICE_XATTR))
    except (OSError, ValueError):
        return None


class PlacementWarning(UserWarning):
    """Tensors were copied to keep a unit of the model on one device."""


def _device(d):
    if isinstance(d, torch.device):
        dev = d
    elif isinstance(d, int):
        dev = torch.device("cuda", d)
    else:
        try:
            dev = torch.device(d)
        except (RuntimeError, TypeError):
            dev = None
        if dev is None:
            raise ValueError("vyrefs: device_map names %r, which is not a device (Fix: name GPUs, e.g. {\"\": 0} "
                             "or {\"model.layers.20\": 1})" % (d,))
    if dev.type == "cuda" and (not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count()):
        raise ValueError("vyrefs: device_map names %s, which this process does not have (Fix: name a GPU it has, "
                         "or device_map=None: each layer runs where its files are)" % dev)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    if dev.type not in ("cuda", "cpu"):
        raise ValueError("vyrefs: device_map names %s; a mapped model runs where its files are, on a GPU or the host "
                         "(Fix: name GPUs, e.g. {\"\": 0} or {\"model.layers.20\": 1})" % (d,))
    return dev


def _tensors(module, recurse):
    """(module, key, kind, tensor) of `module`'s parameters and buffers."""
    mods = module.named_modules() if recurse else [("", module)]
    for _, mod in mods:
        for key, p in mod._parameters.items():
            if p is not None:
                yield mod, key, "param", p
        for key, b in mod._buffers.items():
            if b is not None:
                yield mod, key, "buffer", b


def _nbytes(t):
    return t.numel() * t.element_size()


def units(model):
    """[(name, [(module, key, kind, tensor)])] in module order, named as
    accelerate's device maps name them: each module of a class in
    model._no_split_modules whole; every other module with tensors of its
    own and none below; and each own tensor of a module with both."""
    whole = set(getattr(model, "_no_split_modules", None) or [])
    found, inside = [], None
    for name, mod in model.named_modules():
        if inside is not None and (name == inside or name.startswith(inside + ".")):
            continue
        inside = None
        if name and type(mod).__name__ in whole:
            inside = name
            found.append((name, list(_tensors(mod, True))))
            continue
        own = list(_tensors(mod, False))
        if not own:
            continue
        if any(True for child in mod.children() for _ in _tensors(child, True)):
            found.extend(((name + "." if name else "") + key, [(m, key, kind, t)]) for m, key, kind, t in own)
        else:
            found.append((name, own))
    return found


def _named_home(device_map, name):
    """The device a device_map dict gives unit `name` (its longest key that
    is the name or a module above it), or None."""
    best = None
    for key, dev in device_map.items():
        if key == "" or name == key or name.startswith(key + "."):
            if best is None or len(key) > len(best[0]):
                best = (key, dev)
    return None if best is None else best[1]


def _named(device_map):
    """A device_map as a dict of devices, or None for the names that mean
    "where the files are"."""
    if device_map is None or device_map in ("auto", "balanced", "sequential", "balanced_low_0"):
        return None
    if not isinstance(device_map, dict):
        device_map = {"": device_map}
    return {key: _device(dev) for key, dev in device_map.items()}


def check(device_map):
    """Raise ValueError, with a Fix, for a device_map naming a device this
    process lacks: before anything is mapped."""
    _named(device_map)


def homes(model, device_map=None):
    """{unit name: torch.device}: where each unit runs. device_map None,
    "auto", "balanced" or "sequential": where most of its bytes are (the
    mount placed the files); a dict: what it names, else the same rule."""
    named = _named(device_map)
    out = {}
    for name, tensors in units(model):
        want = _named_home(named, name) if named else None
        if want is None:
            weight = {}
            for _, _, _, t in tensors:
                if t.device.type != "meta":
                    weight[t.device] = weight.get(t.device, 0) + _nbytes(t)
            if not weight:
                continue
            want = max(weight, key=lambda d: (weight[d], -(d.index or 0)))
        out[name] = want
    return out


def spread_like(model, sd):
    """A device_map ({unit: ordinal}) to build `model` (on meta) from state
    dict `sd` whose tensors sit on several GPUs, or None (one device): the
    units, in order, fill the GPUs in the order sd's files use them, each
    GPU taking the share of the model's bytes it holds of sd's, as
    accelerate's "sequential" map fills GPUs. By bytes, not names: a
    conversion renames (fused experts, moved prefixes). A unit holding a
    tensor of an earlier unit (tied) goes with it."""
    held, counted = {}, set()
    for t in sd.values():
        if t.device.type == "cuda" and id(t) not in counted:  # a tied name maps the same tensor: once
            counted.add(id(t))
            held[t.device.index] = held.get(t.device.index, 0) + _nbytes(t)
    if len(held) < 2:
        return None
    found, seen = [], set()
    for name, tensors in units(model):
        size = 0
        for _, _, _, t in tensors:
            if id(t) not in seen:
                seen.add(id(t))
                size += _nbytes(t)
        found.append((name, tensors, size))
    total, source = sum(s for _, _, s in found) or 1, sum(held.values()) or 1
    ends, at = [], 0
    for gpu, n in held.items():
        at += n
        ends.append((at / source, gpu))
    out, home, done = {}, {}, 0
    for name, tensors, size in found:
        middle = (done + size / 2) / total
        gpu = next((g for end, g in ends if middle < end), ends[-1][1])
        gpu = next((home[id(t)] for _, _, _, t in tensors if id(t) in home), gpu)
        for _, _, _, t in tensors:
            home.setdefault(id(t), gpu)
        out[name] = gpu
        done += size
    return out


def gather(model, where):
    """Copy each unit's tensors that are not on its home there (a tied
    tensor once per device, so it stays tied). Returns the bytes copied;
    warns with the count when it is not 0."""
    copied, n, made = 0, 0, {}
    for name, tensors in units(model):
        home = where.get(name)
        if home is None:
            continue
        for mod, key, kind, t in tensors:
            if t.device == home or t.device.type == "meta":
                continue
            memo = (id(t), home)
            if memo not in made:
                moved = t.data.to(home)
                if kind == "param":
                    moved = torch.nn.Parameter(moved, requires_grad=t.requires_grad)
                made[memo] = moved
                copied += _nbytes(t)
                n += 1
            if kind == "param":
                mod._parameters[key] = made[memo]
            else:
                mod._buffers[key] = made[memo]
    if copied:
        warnings.warn("vyrefs: copied %d bytes (%d tensors) so that each layer runs on one GPU: their files sit on "
                      "another (Fix: keep a model's files on one GPU, e.g. setfattr -n user.vyre.device -v N DIR "
                      "before copying, or copy it whole with vyrefs cp -r: docs/devices.md)" % (copied, n),
                      PlacementWarning, stacklevel=3)
    return copied


def dispatch(model, where):
    """Hooks that move activations between the units' devices (accelerate's
    dispatch_model), when there are several; sets model.hf_device_map."""
    devices = []
    for d in where.values():
        if d not in devices:
            devices.append(d)
    if len(devices) < 2:
        return
    try:
        from accelerate import dispatch_model
    except ImportError:
        raise ImportError("vyrefs: the model runs on %s; running a model across GPUs needs accelerate (Fix: "
                          "install accelerate, or keep the model's files on one GPU: docs/devices.md)"
                          % ", ".join(map(str, devices))) from None
    device_map = {name: (d.index if d.type == "cuda" else d.type) for name, d in where.items()}
    dispatch_model(model, device_map=device_map, main_device=devices[0])
    model.hf_device_map = device_map
