"""Map files of a vyrefs mount into this process with no copy.

    m = vyrefs.map("/mnt/gpu/w", dtype="float32", shape=(1024, 1024))
    t = torch.as_tensor(m, device="cuda")    # __cuda_array_interface__ v3
    t = torch.from_dlpack(m)                  # DLPack
    a = cupy.asarray(m)
    m.sync()                                  # cat /mnt/gpu/w shows it
    m.close()                                 # or: with vyrefs.map(...) as m:

On a mount with the host backend the memory is host memory: numpy.asarray(m)
sees it with no copy (__array_interface__), and m.buffer is a memoryview.

Whole models: vyrefs.torch.load_state_dict / attach / save, and
vyrefs.transformers.from_pretrained (each imports its framework when used).

The mapping is the file's device memory itself. Tensors made from it must
not outlive it: keep `m` open while they are used. A file this process may
write is mapped for reading and writing; one it may only read, read-only
(vyrefs.map(..., readonly=True) asks for that): its tensors read, a write
faults in this process, and the file never changes. The cuda backend maps
no file read-only (docs/client.md says why, and what to do). While it is
mapped a file cannot be resized.

A thin ctypes layer over libvyrefs.so (client/vyrefs.h), found through
VYREFS_LIB, else the loader's search path.
"""

import ctypes
import ctypes.util
import math
import os

__all__ = ["map", "copy", "Mapping", "VyrefsError"]
__version__ = "0.3.0"  # the top-level file VERSION; tests/cli/cli_test.sh checks they agree


class VyrefsError(OSError):
    """A failed libvyrefs call: errno and the library's message (with a Fix)."""


# name -> (array-interface typestr or None, item size, DLPack (code, bits))
_DTYPES = {
    "bool": ("|b1", 1, (6, 8)),
    "int8": ("|i1", 1, (0, 8)),
    "int16": ("<i2", 2, (0, 16)),
    "int32": ("<i4", 4, (0, 32)),
    "int64": ("<i8", 8, (0, 64)),
    "uint8": ("|u1", 1, (1, 8)),
    "uint16": ("<u2", 2, (1, 16)),
    "uint32": ("<u4", 4, (1, 32)),
    "uint64": ("<u8", 8, (1, 64)),
    "float16": ("<f2", 2, (2, 16)),
    "float32": ("<f4", 4, (2, 32)),
    "float64": ("<f8", 8, (2, 64)),
    "bfloat16": (None, 2, (4, 16)),  # no typestr: use DLPack
}
_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "f2": "float16", "f4": "float32",
            "f8": "float64", "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64", "u1": "uint8",
            "u2": "uint16", "u4": "uint32", "u8": "uint64", "long": "int64", "int": "int32", "bf16": "bfloat16"}

_lib = None


def _library():
    global _lib
    if _lib is None:
        path = os.environ.get("VYREFS_LIB") or ctypes.util.find_library("vyrefs") or "libvyrefs.so"
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise VyrefsError(2, "vyrefs: cannot load %s: %s (Fix: make install vyrefs, or set VYREFS_LIB to "
                                 "its build/libvyrefs.so)" % (path, e)) from None
        lib.vy_map.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
        lib.vy_map.restype = ctypes.c_int
        for f in ("vy_mapping_ptr", "vy_mapping_size"):
            getattr(lib, f).argtypes = [ctypes.c_void_p]
            getattr(lib, f).restype = ctypes.c_uint64
        lib.vy_mapping_device.argtypes = [ctypes.c_void_p]
        lib.vy_mapping_device.restype = ctypes.c_int
        for f in ("vy_sync", "vy_unmap"):
            getattr(lib, f).argtypes = [ctypes.c_void_p]
            getattr(lib, f).restype = ctypes.c_int
        lib.vy_last_error.argtypes = []
        lib.vy_last_error.restype = ctypes.c_char_p
        lib.vy_copy_file.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.POINTER(ctypes.c_int)]
        lib.vy_copy_file.restype = ctypes.c_int
        _lib = lib
    return _lib


def _check(rc):
    if rc < 0:
        raise VyrefsError(-rc, _library().vy_last_error().decode(errors="replace"))


def _dtype_name(dtype):
    if isinstance(dtype, str):
        name = dtype
    elif str(dtype).startswith("torch."):
        name = str(dtype)[len("torch."):]
    elif hasattr(dtype, "name") and isinstance(dtype.name, str):
        name = dtype.name  # numpy.dtype
    elif hasattr(dtype, "__name__"):
        name = dtype.__name__  # numpy.float32, a type
    else:
        name = str(dtype)
    name = _ALIASES.get(name, name)
    if name not in _DTYPES:
        raise TypeError("vyrefs: unknown dtype %r (Fix: use one of %s)" % (dtype, ", ".join(sorted(_DTYPES))))
    return name


# ---- DLPack (dlpack.h, the unversioned DLManagedTensor) ----------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

_live = {}  # address of a DLManagedTensor -> what keeps it valid (and the mapping) alive


@_DELETER
def _dl_deleter(managed):
    _live.pop(ctypes.addressof(managed.contents), None)


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_pyapi = ctypes.pythonapi
_pyapi.PyCapsule_New.restype = ctypes.py_object
_pyapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
_pyapi.PyCapsule_IsValid.restype = ctypes.c_int
_pyapi.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_pyapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pyapi.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule):
    # A capsule nobody consumed still owns its tensor (a consumer renames it).
    if _pyapi.PyCapsule_IsValid(capsule, b"dltensor"):
        _live.pop(_pyapi.PyCapsule_GetPointer(capsule, b"dltensor"), None)


_MAP_READONLY = 1  # client/vyrefs.h VY_MAP_READONLY


class Mapping:
    """A file of a vyrefs mount, mapped: `ptr`, `size` (bytes), `device`
    (CUDA ordinal, or -1 on the host backend), `shape`, `dtype` and
    `readonly`. `readonly` None (the default): read-only when this process
    may not write the file, so a reader of a 0644 model maps it; a write
    through a read-only mapping faults in this process, and the file never
    changes (docs/client.md: the cuda backend refuses it, with a Fix)."""

    def __init__(self, path, dtype="uint8", shape=None, readonly=None):
        lib = _library()
        self._h = None
        self.dtype = _dtype_name(dtype)
        typestr, itemsize, _ = _DTYPES[self.dtype]
        if readonly is None:
            readonly = os.path.exists(path) and not os.access(path, os.W_OK)
        self.readonly = bool(readonly)
        h = ctypes.c_void_p()
        _check(lib.vy_map(os.fsencode(path), _MAP_READONLY if self.readonly else 0, ctypes.byref(h)))
        self._h = h
        self.path = path
        self.ptr = lib.vy_mapping_ptr(h)
        self.size = lib.vy_mapping_size(h)
        self.device = lib.vy_mapping_device(h)
        if shape is None:
            shape = (self.size // itemsize,)
        elif isinstance(shape, int):
            shape = (shape,)
        self.shape = tuple(int(s) for s in shape)
        need = math.prod(self.shape) * itemsize
        if any(s < 0 for s in self.shape) or need > self.size:
            self.close()
            raise ValueError("vyrefs: shape %s of %s takes %d bytes, %s holds %d (Fix: a smaller shape, or a "
                             "larger file: truncate -s)" % (self.shape, self.dtype, need, path, self.size))
        self.nbytes = need

    # -- lifetime
    def close(self):
        """Wait for this process's device work, drop the kernel's cached
        pages of the file, and end the mapping."""
        if self._h is not None:
            h, self._h = self._h, None
            _check(_library().vy_unmap(h))

    def sync(self):
        """Wait for this process's device work, then drop the kernel's cached
        pages of the file, so readers through the mount see it."""
        self._open()
        _check(_library().vy_sync(self._h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _open(self):
        if self._h is None:
            raise ValueError("vyrefs: the mapping of %s is closed (Fix: map it again)" % self.path)

    # -- zero-copy views
    @property
    def __cuda_array_interface__(self):
        self._open()
        if self.device < 0:
            raise AttributeError("vyrefs: host-backend memory has no __cuda_array_interface__ (use numpy)")
        typestr = _DTYPES[self.dtype][0]
        if typestr is None:
            raise AttributeError("vyrefs: bfloat16 has no array-interface type (Fix: use torch.from_dlpack(m))")
        return {"shape": self.shape, "typestr": typestr, "data": (self.ptr, self.readonly), "version": 3,
                "strides": None}

    @property
    def __array_interface__(self):
        self._open()
        if self.device >= 0:
            raise AttributeError("vyrefs: device memory has no __array_interface__ (use torch, cupy or DLPack)")
        typestr = _DTYPES[self.dtype][0]
        if typestr is None:
            raise AttributeError("vyrefs: numpy has no bfloat16")
        return {"shape": self.shape, "typestr": typestr, "data": (self.ptr, self.readonly), "version": 3}

    @property
    def buffer(self):
        """Host backend only: the bytes as a memoryview (read-only where
        the mapping is)."""
        self._open()
        if self.device >= 0:
            raise ValueError("vyrefs: device memory is not addressable from the CPU (Fix: use torch or cupy)")
        raw = (ctypes.c_char * self.nbytes).from_address(self.ptr)
        raw.mapping = self  # a view of the buffer keeps the memory mapped
        view = memoryview(raw).cast("B")
        return view.toreadonly() if self.readonly else view

    def __dlpack_device__(self):
        return (2, self.device) if self.device >= 0 else (1, 0)  # kDLCUDA, kDLCPU

    def __dlpack__(self, stream=None, **kwargs):
        # The mapping's memory is ready once vy_map returned: nothing to
        # order on the consumer's stream. kwargs (max_version, copy, ...):
        # this is the unversioned form, which every consumer takes.
        self._open()
        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        managed = _DLManagedTensor()
        code, bits = _DTYPES[self.dtype][2]
        dev_type, dev_id = self.__dlpack_device__()
        managed.dl_tensor = _DLTensor(ctypes.c_void_p(self.ptr), _DLDevice(dev_type, dev_id), len(self.shape),
                                      _DLDataType(code, bits, 1), shape, None, 0)
        managed.manager_ctx = None
        managed.deleter = _dl_deleter
        _live[ctypes.addressof(managed)] = (managed, shape, self)
        return _pyapi.PyCapsule_New(ctypes.addressof(managed), b"dltensor", _capsule_destructor)

    def __repr__(self):
        state = "closed" if self._h is None else "device %d" % self.device if self.device >= 0 else "host"
        return "vyrefs.Mapping(%r, dtype=%s, shape=%s, %s%s)" % (self.path, self.dtype, self.shape, state,
                                                             ", read-only" if self.readonly else "")


def map(path, dtype="uint8", shape=None, readonly=None):  # noqa: A001 - the name users expect
    """Map the file at `path` as an array of `dtype` (a name, a numpy or a
    torch dtype) and `shape` (default: the whole file, one dimension);
    read-only where this process may not write it, or `readonly` says so."""
    return Mapping(path, dtype=dtype, shape=shape, readonly=readonly)


def copy(src, dst, threads=0):
    """Copy a file into, out of or within a vyrefs mount at the speed of the
    other side (what `vyrefs cp` does): "daemon", "in the mount" or "plain"
    says how it went. A directory `dst` takes src's name."""
    if os.path.isdir(dst):
        dst = os.path.join(dst, os.path.basename(os.fspath(src)))
    how = ctypes.c_int(0)
    _check(_library().vy_copy_file(os.fsencode(src), os.fsencode(dst), int(threads), None, None, ctypes.byref(how)))
    return {1: "daemon", 2: "in the mount", 3: "plain"}.get(how.value, "plain")


from . import safetensors  # noqa: E402  (vyrefs.safetensors.load / save)


def __getattr__(name):
    # vyrefs.torch and vyrefs.transformers import their framework, so they
    # load on first use: `import vyrefs` needs neither.
    if name in ("torch", "transformers"):
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'vyrefs' has no attribute %r" % name)
