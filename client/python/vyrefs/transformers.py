"""A transformers model from a directory of a vyrefs mount, its weights the
files' memory (no copy; processes share them).

    model = vyrefs.transformers.from_pretrained("/mnt/gpu/llama")
    out = model.generate(**tok("Hello", return_tensors="pt").to(model.device))

The model class comes from the config (config.architectures, else
AutoModelForCausalLM; model_class= picks another), built with no memory for
its parameters (vyrefs.torch.empty_weights), then attached. transformers is
imported when this is called.
"""

import copy
import os

import torch

from . import derived as _derived
from . import placement as _placement
from . import quantized as _quantized
from . import ranks as _ranks
from . import torch as _vt


def _file_dtype(sd):
    """The files' own dtype (vyrefs' "auto": no copy): the first floating
    tensor's, float8 storage never."""
    for t in sd.values():
        if _quantized.castable(t.dtype):
            return t.dtype
    return None


def _dtype(dtype):
    if dtype is None or dtype == "auto" or isinstance(dtype, torch.dtype):
        return None if dtype == "auto" else dtype
    found = getattr(torch, str(dtype).replace("torch.", ""), None)
    if not isinstance(found, torch.dtype):
        raise TypeError("vyrefs: dtype %r is not a torch dtype (Fix: e.g. torch.bfloat16, or \"auto\")" % (dtype,))
    return found


def _keeps_fp32(cls_or_model, dtype):
    """transformers keeps some modules in float32 whatever dtype is asked
    (T5's wo, ...: a class attribute, known before a build; a model may set
    it as it is built): the files' tensors cast by vyrefs would not be its."""
    keep = getattr(cls_or_model, "_keep_in_fp32_modules", None)
    return bool(keep) and dtype is not None and dtype != torch.float32


def _identity(transformers, cls, config, dtype, attn):
    """What a converted copy is made with besides its sources."""
    return {"transformers": transformers.__version__, "class": cls.__name__, "dtype": str(dtype),
            "attn_implementation": attn, "config": _ranks.fingerprint(config)}


def _convert(transformers, cls, path, config, dtype, sd, attn, differ, identity, trust_remote_code):
    """The converted copy's state dict (mapped), made by transformers' own
    from_pretrained where it is missing or stale; closes `sd`. `identity`
    is taken before any model is built from `config` (a build writes its
    dtype into the config: a later start, reading config.json afresh,
    would find the copy stale). Files on one GPU are converted there;
    files spread over several GPUs are converted spread as they are
    (placement.spread_like), each GPU's part saved on that GPU."""
    gpu = _derived.one_gpu(sd)
    spread = None  # files on several GPUs: their device map, set below inside the try (make runs after)

    def make(tmp):
        kw = {"config": config, "output_loading_info": True,
              ("dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"): dtype or "auto"}
        if gpu is not None or spread:
            kw["device_map"] = spread or {"": gpu}
        if attn is not None:
            kw["attn_implementation"] = attn
        # transformers' conversion run on the files' mapped tensors (on the
        # GPU already): the files are not read again through the mount. A
        # transformers that does not convert a given state dict leaves keys
        # missing (or refuses it): then it reads the files.
        try:
            loaded, info = cls.from_pretrained(None, state_dict=dict(sd), **kw)
            lost = _lost(info)
        except _OUT_OF_MEMORY:
            raise  # no second try: said below
        except (TypeError, ValueError, KeyError, RuntimeError, OSError):
            loaded, lost = None, None
        if lost:
            loaded = None
        if loaded is None:
            loaded, info = cls.from_pretrained(path, **kw)
            lost = _lost(info)
        if lost:
            raise ValueError("vyrefs: the files do not hold this model: %s (before converting: %s) (Fix: build it "
                             "from the config the files were saved with)" % (_vt._shown(lost, 5), differ))
        _derived.save(loaded, tmp, gpu)
        del loaded
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    try:
        if gpu is None and _derived.gpu_of(sd) is not None:
            spread = _placement.spread_like(
                _build(transformers, cls, copy.deepcopy(config), dtype, trust_remote_code, attn), sd)
        where, _ = _derived.ensure(path, identity, make, gpu)
    except PermissionError as e:
        raise PermissionError("%s; transformers converts these files at load (%s)" % (e, differ)) from None
    except ImportError as e:
        raise _cannot_load(path, config, e) from e
    except _OUT_OF_MEMORY as e:
        raise _no_room(path, sorted(set(spread.values())) if spread else [gpu], e) from e
    finally:
        sd.close()
    return where, _vt.load_state_dict(where)


_OUT_OF_MEMORY = getattr(torch.cuda, "OutOfMemoryError", MemoryError)


def _no_room(path, gpus, e):
    """transformers' conversion ran out of device memory, on the GPUs the
    files are on: the converted copy is made beside them."""
    gpus = [g for g in gpus if g is not None]
    where = "GPU%s %s" % ("s" if len(gpus) > 1 else "", ", ".join(map(str, gpus))) if gpus else "this device"
    return MemoryError("vyrefs: transformers converts %s at load, and its converted copy is made beside the files "
                       "(on %s), which has no room for it: %s (Fix: free memory on %s; or copy the files to GPUs "
                       "with room for the converted model too (setfattr -n user.vyre.device -v N on the directory "
                       "before copying); or load it with transformers' own from_pretrained)"
                       % (path, where, str(e).split("\n")[0][:200], where))


def _cannot_load(path, config, e):
    """A quantizer (bitsandbytes, ...) or another package transformers
    wants for these files is missing here."""
    quant = _quantized.method(config)
    said = "; the checkpoint is quantized: %s" % (quant,) if quant else ""
    return ImportError("vyrefs: transformers cannot load %s on this machine: %s (Fix: install what it names; "
                       "vyrefs attaches what transformers itself loads)%s" % (path, e, said))


def _lost(info):
    return list(info.get("missing_keys") or []) + [str(m) for m in info.get("mismatched_keys") or []]


def _config(transformers, path, trust_remote_code, kwargs):
    config = kwargs.pop("config", None)
    if config is None:
        config, unused = transformers.AutoConfig.from_pretrained(
            path, trust_remote_code=trust_remote_code, return_unused_kwargs=True, **kwargs)
        if unused:
            raise TypeError("vyrefs: from_pretrained does not take %s (Fix: drop them; vyrefs passes dtype, "
                            "device_map, trust_remote_code, attn_implementation and config settings)"
                            % ", ".join(sorted(unused)))
    config.name_or_path = os.fspath(path)
    return config


def converted_state_dict(path, dtype="auto", model_class=None, trust_remote_code=False, attn_implementation=None,
                         **kwargs):
    """The tensors transformers' own from_pretrained(path) makes of the
    files of directory `path` (experts fused, keys renamed, modules kept in
    float32), for a program's own loader: made once and kept beside them
    (vyrefs/derived.py, as from_pretrained keeps them), mapped with no copy;
    attach them with vyrefs.torch.attach. Made again when the files, the
    settings or transformers changed. Close it (or let the model hold it)."""
    import transformers
    dtype, config, cls = _start(transformers, path, dtype, model_class, trust_remote_code, kwargs)
    identity = _identity(transformers, cls, config, dtype, attn_implementation)
    kept = _derived.current(path, identity)
    if kept:
        return _vt.load_state_dict(kept)
    sd = _vt.load_state_dict(path)
    _, out = _convert(transformers, cls, path, config, dtype, sd, attn_implementation,
                      "asked for: converted_state_dict", identity, trust_remote_code)
    return out


def _start(transformers, path, dtype, model_class, trust_remote_code, kwargs):
    """(dtype, config, model class) of a load, as transformers reads them;
    torch_dtype is dtype's older name."""
    if "torch_dtype" in kwargs:
        dtype = kwargs.pop("torch_dtype")
    dtype = _dtype(dtype)
    config = _config(transformers, path, trust_remote_code, kwargs)
    return dtype, config, _model_class(transformers, config, model_class, trust_remote_code)


def _model_class(transformers, config, model_class, trust_remote_code):
    if model_class is not None:
        return model_class
    for arch in getattr(config, "architectures", None) or []:
        cls = getattr(transformers, arch, None)
        if cls is not None:
            return cls
    return transformers.AutoModelForCausalLM


def _build(transformers, cls, config, dtype, trust_remote_code, attn, quantizer=None, gpu=None):
    """The model with no memory for its parameters; a quantized
    checkpoint's with the quantizer's modules (vyrefs/quantized.py)."""
    kw = {} if attn is None else {"attn_implementation": attn}
    major = int(transformers.__version__.split(".")[0])
    if dtype is not None:
        kw["dtype" if major >= 5 else "torch_dtype"] = dtype
    before = torch.get_default_dtype()
    try:
        with _vt.empty_weights():
            if dtype is not None and dtype.is_floating_point:
                torch.set_default_dtype(dtype)  # buffers made in the dtype, as from_pretrained makes them
            if hasattr(cls, "_from_config"):
                model = cls._from_config(config, **kw)
            else:
                model = cls.from_config(config, trust_remote_code=trust_remote_code, **kw)
            if quantizer is not None:
                _quantized.prepare(quantizer, model, dtype, gpu)
            return model
    finally:
        torch.set_default_dtype(before)


def from_pretrained(path, dtype="auto", device_map=None, trust_remote_code=False, strict=True, model_class=None,
                    attn_implementation=None, **kwargs):
    """Like transformers' from_pretrained(path, ...) for a directory in a
    vyrefs mount: the model, in eval mode, tied as its config says, with its
    generation_config, weights attached with no copy. dtype: "auto" (the
    files' own: no copy), or a torch dtype (floating tensors of another
    dtype are converted: a copy). torch_dtype is dtype's older name.
    device_map: None, "auto", "balanced" or "sequential" run each layer
    where its files are (a layer whose tensors sit on two GPUs runs where
    most of its bytes are: the rest is copied); a dict or a device puts
    what it names there (a copy where the files are elsewhere).
    model.vyrefs_copied_bytes says how many bytes were copied (0: none):
    dtype conversions and placement's copies; a PlacementWarning says when
    placement copied. Across several GPUs
    accelerate's hooks move the activations (vyrefs.placement). Other
    keyword arguments go to the config."""
    import transformers
    _placement.check(device_map)
    dtype, config, cls = _start(transformers, path, dtype, model_class, trust_remote_code, kwargs)
    identity = _identity(transformers, cls, config, dtype, attn_implementation)  # before a build changes config
    kept = _derived.current(path, identity) if strict else None  # beside the files, or this user's own
    # A copy converted before from these files as they are now, with these
    # settings: only it is mapped, not the files, and attached at once.
    sd = _vt.load_state_dict(kept or path)
    converted = kept
    try:
        try:
            quant = _quantized.quantizer(transformers, config, _derived.gpu_of(sd))
        except ImportError as e:
            raise _cannot_load(path, config, e) from e

        def build(sd):
            dt = dtype or (quant and _quantized.model_dtype(quant, config)) or _file_dtype(sd)
            return _build(transformers, cls, config, dt, trust_remote_code, attn_implementation, quant,
                          _derived.gpu_of(sd))

        def attach(model, sd, strict, dtype=None):
            """The bytes copied to convert dtypes (0: all attached as stored)."""
            if quant is None:
                return _vt.attach(model, sd, strict=strict, dtype=dtype).copied_bytes
            # quantized: each tensor in its parameter's dtype, float8 and scales as stored
            built, copied = _quantized.as_built(model, sd, strict)
            _vt.attach(model, built, strict=strict)
            return copied

        if kept:
            model = build(sd)
            copied = attach(model, sd, True)
        else:
            try:
                if strict and _keeps_fp32(cls, dtype):  # converted: no model built for the files first
                    raise _vt.NamesDiffer("transformers keeps %s in float32" % cls._keep_in_fp32_modules)
                model = build(sd)
                if strict and _keeps_fp32(model, dtype):
                    raise _vt.NamesDiffer("transformers keeps %s in float32" % model._keep_in_fp32_modules)
                copied = attach(model, sd, strict, dtype)
            except (_vt.NamesDiffer, _vt.ShapesDiffer) as differ:
                if not strict:
                    raise
                # transformers converts these files at load: its own load,
                # once, kept beside them (vyrefs/derived.py), then attached.
                converted, sd = _convert(transformers, cls, path, config, dtype, sd, attn_implementation, differ,
                                         identity, trust_remote_code)
                model = build(sd)
                copied = attach(model, sd, True)
        if hasattr(model, "tie_weights"):
            model.tie_weights()
        where = _placement.homes(model, device_map)
        model.vyrefs_copied_bytes = copied + _placement.gather(model, where)
        _placement.dispatch(model, where)
        if quant is not None:
            _quantized.finish(quant, model)
    except BaseException:
        sd.close()
        raise
    gen = os.path.join(os.fspath(path), "generation_config.json")
    if os.path.isdir(path) and os.path.exists(gen) and getattr(model, "generation_config", None) is not None:
        model.generation_config = transformers.GenerationConfig.from_pretrained(path)
    model.vyrefs_converted = converted
    model.eval()
    return model
