"""safetensors files on the GPU, with no copy through the host.

    tensors = vyrefs.safetensors.load("/mnt/gpu/model.safetensors")
    vyrefs.safetensors.save({"w": w, "b": b}, "/mnt/gpu/ckpt.safetensors")

load maps the file and returns its tensors as views of the file's device
memory (CUDA tensors on a GPU mount; CPU tensors on the host backend): no
byte is read or copied. The tensors keep the mapping alive. save writes the
header through the mount, then copies each tensor's bytes into the mapped
file on the device (device to device for CUDA tensors): the file is a valid
safetensors file that safetensors.torch.load_file reads back exactly.
Needs torch (imported when called).
"""

import json
import os
import struct

from . import map as _map

_TO_TORCH = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
             "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool", "U16": "uint16",
             "U32": "uint32", "U64": "uint64"}
_FROM_TORCH = {v: k for k, v in _TO_TORCH.items()}


def _whole(m):
    """The mapping as one torch uint8 tensor, on its device."""
    import torch
    if m.device >= 0:
        return torch.as_tensor(m, device="cuda:%d" % m.device)
    return torch.frombuffer(m.buffer, dtype=torch.uint8)


def _header(path):
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError("vyrefs: %s is not a safetensors file (no header length)" % path)
        n, = struct.unpack("<Q", raw)
        if n > 100 << 20:
            raise ValueError("vyrefs: %s: a header of %d bytes (Fix: check the file)" % (path, n))
        return n, json.loads(f.read(n))


def load(path):
    """The tensors of a safetensors file in a vyrefs mount, as zero-copy
    views of its device memory, by name."""
    import torch
    n, header = _header(path)
    m = _map(path)
    whole = _whole(m)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        dt = getattr(torch, _TO_TORCH[info["dtype"]])
        raw = whole[8 + n + a:8 + n + b]
        if (8 + n + a) % dt.itemsize:
            raw = raw.clone()  # a writer that did not align it: a copy, the only way to view it
        out[name] = raw.view(dt).view(info["shape"])
    return out


def save(tensors, path, metadata=None):
    """Write `tensors` (a dict of torch tensors) as a safetensors file at
    `path` in a vyrefs mount; the bytes go device to device."""
    import torch
    header, offset = {}, 0
    # Widest elements first, as safetensors orders them: every tensor then
    # starts at a multiple of its element size, so load can view it in place.
    items = sorted(tensors.items(), key=lambda kv: (-kv[1].element_size(), kv[0]))
    for name, t in items:
        nbytes = t.numel() * t.element_size()
        dtype = str(t.dtype).replace("torch.", "")
        if dtype not in _FROM_TORCH:
            raise TypeError("vyrefs: safetensors has no type for %s (tensor %r)" % (t.dtype, name))
        header[name] = {"dtype": _FROM_TORCH[dtype], "shape": list(t.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-aligned, as safetensors writes it
    start = 8 + len(text)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(start + offset)
    if offset == 0:
        return
    with _map(path) as m:
        whole = _whole(m)
        for name, t in items:
            a, b = header[name]["data_offsets"]
            if b > a:
                src = t.detach().contiguous().view(-1).view(torch.uint8)
                whole[start + a:start + b].copy_(src, non_blocking=False)
        del whole
        m.sync()
