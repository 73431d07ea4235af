"""safetensors files on the GPU, with no copy through the host.

    tensors = vyrefs.safetensors.load("/mnt/gpu/model.safetensors")
    vyrefs.safetensors.save({"w": w, "b": b}, "/mnt/gpu/ckpt.safetensors")

load maps the file and returns its tensors as views of the file's device
memory (CUDA tensors on a GPU mount; CPU tensors on the host backend): no
byte is read or copied. The tensors keep the mapping alive. save writes the
header through the mount, then copies each tensor's bytes into the mapped
file on the device (device to device for CUDA tensors): the file is a valid
safetensors file that safetensors.torch.load_file reads back exactly.

The format, written here without the safetensors package: 8 bytes, the
header's length N (little-endian); N bytes of JSON, {name: {"dtype",
"shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}; then
the data, offsets counted from its start. Needs torch (imported when called).
"""

import errno
import json
import math
import os
import struct
import warnings

from . import VyrefsError
from . import map as _map

# safetensors dtype -> (torch attribute, bytes per element)
DTYPES = {"F64": ("float64", 8), "F32": ("float32", 4), "F16": ("float16", 2), "BF16": ("bfloat16", 2),
          "I64": ("int64", 8), "I32": ("int32", 4), "I16": ("int16", 2), "I8": ("int8", 1), "U8": ("uint8", 1),
          "BOOL": ("bool", 1), "U16": ("uint16", 2), "U32": ("uint32", 4), "U64": ("uint64", 8),
          "F8_E4M3": ("float8_e4m3fn", 1), "F8_E5M2": ("float8_e5m2", 1), "F8_E8M0": ("float8_e8m0fnu", 1),
          "C64": ("complex64", 8)}
_FROM_TORCH = {attr: code for code, (attr, _) in DTYPES.items()}
_HEADER_MAX = 100 << 20  # the safetensors package's own limit
# Where a mount places a safetensors file's data section (docs/core.md,
# "Placement"), and the alignment GPU libraries' fast kernels want of an
# operand: a tensor off it is computed by other kernels, slower and rounding
# otherwise (issue "exact": 1.22x slower, logits not equal to transformers').
DATA_ALIGN = 4096
TENSOR_ALIGN_MAX = 512  # PyTorch's allocator's; what a placed file gives every tensor at a multiple of it
_PAD_TO = 512  # save: tensors whose size is a multiple of this go first


class AlignmentWarning(UserWarning):
    """Tensors of a mapped file sit off the alignment GPU kernels want."""


def _not_safetensors(path, why):
    return ValueError("vyrefs: %s is not a safetensors file: %s (Fix: give a file written by safetensors, "
                      "save_pretrained or vyrefs.torch.save)" % (path, why))


def _read_exactly(f, n):
    """n bytes of an unbuffered file, fewer only at its end."""
    parts, got = [], 0
    while got < n:
        b = f.read(n - got)
        if not b:
            break
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def read_header(path):
    """(offset of the data, {name: (dtype code, shape, begin, end)}, metadata),
    checked against the file's size: every tensor inside it, its byte count
    that of its shape and dtype."""
    # Unbuffered, exactly the header's bytes: a buffered read fills its
    # buffer of st_blksize, which a mount gives as 2 MiB (its memory's
    # granule), so a 32 KB header cost 2 MiB of reads through FUSE.
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        raw = _read_exactly(f, 8)
        if len(raw) != 8:
            raise _not_safetensors(path, "%d bytes, under the 8 of the header's length" % size)
        n, = struct.unpack("<Q", raw)
        if n > _HEADER_MAX or 8 + n > size:
            raise _not_safetensors(path, "a header of %d bytes in a file of %d" % (n, size))
        text = _read_exactly(f, n)
        if len(text) != n:
            raise _not_safetensors(path, "it ended inside its header (%d of %d bytes)" % (len(text), n))
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, ValueError) as e:
        raise _not_safetensors(path, "its header is not JSON (%s)" % e) from None
    if not isinstance(header, dict):
        raise _not_safetensors(path, "its header is not a JSON object")
    data = size - 8 - n
    meta = header.pop("__metadata__", None) or {}
    entries = {}
    for name, info in header.items():
        try:
            code, shape, (a, b) = info["dtype"], info["shape"], info["data_offsets"]
            ok = isinstance(code, str) and all(isinstance(s, int) and s >= 0 for s in shape) and \
                isinstance(a, int) and isinstance(b, int) and 0 <= a <= b <= data
        except (TypeError, KeyError, ValueError):
            ok = False
        if not ok:
            raise _not_safetensors(path, "tensor %r: %s" % (name, json.dumps(info)[:200]))
        item = DTYPES.get(code, (None, None))[1]
        if item is not None and b - a != math.prod(shape) * item:
            raise _not_safetensors(path, "tensor %r: %d bytes for shape %s of %s" % (name, b - a, shape, code))
        entries[name] = (code, list(shape), a, b)
    return 8 + n, entries, meta


def torch_dtype(code, path="", name=""):
    """The torch dtype for a safetensors dtype code, or a TypeError with a Fix."""
    import torch
    attr = DTYPES.get(code, (None,))[0]
    dt = getattr(torch, attr, None) if attr else None
    if not isinstance(dt, torch.dtype):
        raise TypeError("vyrefs: %s: tensor %r is %s, a dtype %s (Fix: %s)" % (
            path, name, code, "this torch (%s) lacks" % torch.__version__ if attr else "safetensors does not define",
            "a torch that has torch.%s, or save the tensor as a dtype this one has" % attr if attr
            else "rewrite the file with a known dtype"))
    return dt


def code_of(t, name=""):
    """The safetensors dtype code of a torch tensor, or a TypeError with a Fix."""
    attr = str(t.dtype).replace("torch.", "")
    if attr not in _FROM_TORCH:
        raise TypeError("vyrefs: safetensors has no type for %s (tensor %r) (Fix: convert it, e.g. .to(torch.float32))"
                        % (t.dtype, name))
    return _FROM_TORCH[attr]


class _From:
    """Mapping `m`'s device memory from byte `skip` on, as a CUDA array
    interface (torch keeps its owner, this, which holds m)."""

    def __init__(self, m, skip):
        self.mapping = m
        self.__cuda_array_interface__ = {"shape": (m.nbytes - skip,), "typestr": "|u1", "version": 3,
                                         "data": (m.ptr + skip, False), "strides": None}


def whole(m, skip=0):
    """The mapping (from byte `skip` on: a tensor's storage starts there)
    as one torch uint8 tensor on its device, keeping it mapped."""
    import torch
    if m.device >= 0:  # the array interface's owner is held: m, or _From holding m
        return torch.as_tensor(_From(m, skip) if skip else m, device="cuda:%d" % m.device)
    if not m.readonly:
        return torch.frombuffer(m.buffer, dtype=torch.uint8, offset=skip)  # the buffer holds m
    # A read-only mapping: torch has no read-only tensor and says so; its
    # tensors read, and a write faults in this process (docs/client.md).
    import warnings
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The given buffer is not writable")
        return torch.frombuffer(m.buffer, dtype=torch.uint8, offset=skip)


def _allowed(a):
    """The alignment a tensor at offset `a` of a data section on a page may
    have: the largest power of two dividing a, at most TENSOR_ALIGN_MAX."""
    return TENSOR_ALIGN_MAX if a % TENSOR_ALIGN_MAX == 0 else a & -a


def misaligned(m, start, entries):
    """How many of the tensors (read_header's entries) of the mapping `m`
    sit less aligned than their place in the file allows (a file the mount
    could not place: its data section off a page), and how many of those
    are copied to be viewed at all (off their element size)."""
    off = sum(1 for _, _, a, b in entries.values() if b > a and (m.ptr + start + a) % _allowed(a))
    copied = sum(1 for code, _, a, b in entries.values() if b > a and (m.ptr + start + a) % DTYPES[code][1])
    return off, copied


def say_misaligned(path, m, start, entries, stacklevel=3):
    """An AlignmentWarning when misaligned() counts any tensor, off its
    place's alignment or copied."""
    off, copied = misaligned(m, start, entries)
    said = []
    if off:
        said.append("%d of %d tensors sit less aligned than their place in the file allows (its data starts at "
                    "byte %d of a %d-byte page, not placed for its format); GPU kernels compute them slower and "
                    "round otherwise than for the framework's own load"
                    % (off, len(entries), (m.ptr + start) % DATA_ALIGN, DATA_ALIGN))
    if copied:  # off their element size: so placed or not (a writer that did not align them)
        said.append("tensors copied to be viewed at all (off their element size): %d" % copied)
    if said:
        warnings.warn("vyrefs: %s: %s (Fix: %ssave it with vyrefs.torch.save, which aligns every tensor)"
                      % (path, "; ".join(said), "map it again once no program maps it (the mount places it then, "
                         "given room for a copy of it; .vyre/log says why it could not), or " if off else ""),
                      AlignmentWarning, stacklevel=stacklevel)


def views(path, m, start, entries):
    """{name: tensor} over the mapping `m` of `path` (read_header's entries).
    Tensors less aligned than the file allows are said (AlignmentWarning),
    never silently."""
    out = {}
    if not entries:
        return out
    say_misaligned(path, m, start, entries)
    import torch
    all_bytes = whole(m)
    # The mapping as each dtype, from its first byte aligned to it: a
    # tensor is then one as_strided (a 7B rank's 291 slices and two views
    # each cost more than its header's read, on a GPU).
    typed = {}
    for name, (code, shape, a, b) in entries.items():
        dt = torch_dtype(code, path, name)
        item = DTYPES[code][1]
        at = start + a
        if b == a:
            out[name] = torch.empty(shape, dtype=dt, device=all_bytes.device)  # no bytes: nothing to view
            continue
        if (m.ptr + at) % item:
            # a writer that did not align it: a copy, the only way to view it (said above)
            out[name] = all_bytes[at:start + b].clone().view(dt).view(shape)
            continue
        lead = -m.ptr % item
        base = typed.get(dt)
        if base is None:
            raw = whole(m, lead) if lead else all_bytes
            base = typed[dt] = raw[:raw.numel() // item * item].view(dt)
        strides, step = [], 1
        for n in reversed(shape):
            strides.append(step)
            step *= n
        out[name] = base.as_strided(shape, strides[::-1], base.storage_offset() + (at - lead) // item)
    return out


def load(path):
    """The tensors of a safetensors file in a vyrefs mount, as zero-copy
    views of its device memory, by name."""
    start, entries, _ = read_header(path)
    for name, (code, _, _, _) in entries.items():
        torch_dtype(code, path, name)  # before mapping anything
    m = _map(path)
    try:
        return views(path, m, start, entries)
    except BaseException:
        m.close()
        raise


def save(tensors, path, metadata=None):
    """Write `tensors` (a dict of torch tensors) as a safetensors file at
    `path` in a vyrefs mount; the bytes go device to device. It is written
    under a temporary name and renamed over `path`, so a process that has
    the old file mapped keeps it until it lets go."""
    tmp = os.path.join(os.path.dirname(path) or ".", ".%s.vyrefs-tmp" % os.path.basename(path))
    try:
        write(tensors, tmp, metadata)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    os.replace(tmp, path)


def write(tensors, path, metadata=None):
    """save's work, at `path` itself: the header through the mount, then
    each tensor's bytes into the mapped file."""
    import torch
    header, offset = {}, 0
    # Tensors whose size is a multiple of 512 first: each then starts at a
    # multiple of 512 of a data section that starts on a page (below), where
    # PyTorch's allocator would put it, wherever the file is copied. Then,
    # and among them, widest elements first, as safetensors orders them:
    # every tensor starts at a multiple of its element size.
    items = sorted(tensors.items(), key=lambda kv: (kv[1].numel() * kv[1].element_size() % _PAD_TO != 0,
                                                    -kv[1].element_size(), kv[0]))
    for name, t in items:
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": code_of(t, name), "shape": list(t.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    # The data starts on a page: the format allows a header padded with
    # spaces (safetensors pads to 8 so), and a file mapped from any page-
    # aligned start (a mount, mmap of tmpfs) has every tensor aligned.
    text += b" " * (-(8 + len(text)) % DATA_ALIGN)
    start = 8 + len(text)
    try:
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
            f.truncate(start + offset)
        if not offset:
            return
        with _map(path) as m:
            all_bytes = whole(m)
            for name, t in items:
                a, b = header[name]["data_offsets"]
                if b > a:
                    src = t.detach().contiguous().view(-1).view(torch.uint8)
                    all_bytes[start + a:start + b].copy_(src, non_blocking=False)
            del all_bytes
            m.sync()
    except (OSError, VyrefsError) as e:
        if e.errno == errno.ENOSPC:
            raise VyrefsError(errno.ENOSPC, "vyrefs: no room for %s (%d bytes) in the mount (Fix: free files in "
                                            "it, or mount it with a larger budget)" % (path, start + offset)) from None
        raise
