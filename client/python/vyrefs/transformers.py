"""A transformers model from a directory of a vyrefs mount, its weights the
files' memory (no copy; processes share them).

    model = vyrefs.transformers.from_pretrained("/mnt/gpu/llama")
    out = model.generate(**tok("Hello", return_tensors="pt").to(model.device))

The model class comes from the config (config.architectures, else
AutoModelForCausalLM; model_class= picks another), built with no memory for
its parameters (vyrefs.torch.empty_weights), then attached. transformers is
imported when this is called.
"""

import os

import torch

from . import torch as _vt


def _file_dtype(sd):
    for t in sd.values():
        if t.is_floating_point():
            return t.dtype
    return None


def _dtype(dtype):
    if dtype is None or dtype == "auto" or isinstance(dtype, torch.dtype):
        return None if dtype == "auto" else dtype
    found = getattr(torch, str(dtype).replace("torch.", ""), None)
    if not isinstance(found, torch.dtype):
        raise TypeError("vyrefs: dtype %r is not a torch dtype (Fix: e.g. torch.bfloat16, or \"auto\")" % (dtype,))
    return found


def _check_devices(sd, device_map):
    """The files' devices, checked against device_map: vyrefs maps a file
    where it lives, so a device_map can only agree with it."""
    where = sorted({t.device for t in sd.values()}, key=str)
    if device_map is None or device_map in ("auto", "balanced", "sequential"):
        return where
    want = device_map.values() if isinstance(device_map, dict) else [device_map]
    for w in want:
        dev = torch.device("cuda", w) if isinstance(w, int) else torch.device(w)
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        if all(dev != d for d in where):
            raise ValueError("vyrefs: device_map asks for %s; the files are on %s, and a mapping is where its file "
                             "lives (Fix: device_map=None or \"auto\", or move the files: setfattr -n "
                             "user.vyre.device -v N FILE, docs/devices.md)" % (dev, ", ".join(map(str, where))))
    return where


def _dispatch(model, where):
    """A model whose files sit on several GPUs: accelerate's hooks move the
    activations between them, as from_pretrained's device_map does."""
    try:
        from accelerate import dispatch_model
    except ImportError:
        raise ImportError("vyrefs: the files are on %s; running a model across GPUs needs accelerate (Fix: install "
                          "accelerate, or keep the model's files on one GPU: docs/devices.md)"
                          % ", ".join(map(str, where))) from None
    placed = {}
    for name, p in list(model.named_parameters()) + list(model.named_buffers()):
        placed.setdefault(name.rpartition(".")[0], p.device)
    main = next(iter(placed.values()))
    dispatch_model(model, device_map={k: v for k, v in placed.items()} or {"": main}, main_device=main)


def _model_class(transformers, config, model_class, trust_remote_code):
    if model_class is not None:
        return model_class
    for arch in getattr(config, "architectures", None) or []:
        cls = getattr(transformers, arch, None)
        if cls is not None:
            return cls
    return transformers.AutoModelForCausalLM


def _build(transformers, cls, config, dtype, trust_remote_code, attn):
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
                return cls._from_config(config, **kw)
            return cls.from_config(config, trust_remote_code=trust_remote_code, **kw)
    finally:
        torch.set_default_dtype(before)


def from_pretrained(path, dtype="auto", device_map=None, trust_remote_code=False, strict=True, model_class=None,
                    attn_implementation=None, **kwargs):
    """Like transformers' from_pretrained(path, ...) for a directory in a
    vyrefs mount: the model, in eval mode, tied as its config says, with its
    generation_config, weights attached with no copy. dtype: "auto" (the
    files' own: no copy), or a torch dtype (floating tensors of another
    dtype are converted: a copy). torch_dtype is dtype's older name.
    device_map: the files' device(s) or "auto"; across several GPUs,
    accelerate places hooks. Other keyword arguments go to the config."""
    import transformers
    if "torch_dtype" in kwargs:
        dtype = kwargs.pop("torch_dtype")
    dtype = _dtype(dtype)
    config = kwargs.pop("config", None)
    if config is None:
        config, unused = transformers.AutoConfig.from_pretrained(
            path, trust_remote_code=trust_remote_code, return_unused_kwargs=True, **kwargs)
        if unused:
            raise TypeError("vyrefs: from_pretrained does not take %s (Fix: drop them; vyrefs passes dtype, "
                            "device_map, trust_remote_code, attn_implementation and config settings)"
                            % ", ".join(sorted(unused)))
    config.name_or_path = os.fspath(path)
    sd = _vt.load_state_dict(path)
    try:
        where = _check_devices(sd, device_map)
        cls = _model_class(transformers, config, model_class, trust_remote_code)
        model = _build(transformers, cls, config, dtype or _file_dtype(sd), trust_remote_code, attn_implementation)
        _vt.attach(model, sd, strict=strict, dtype=dtype)
    except BaseException:
        sd.close()
        raise
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    if len(where) > 1:
        _dispatch(model, where)
    gen = os.path.join(os.fspath(path), "generation_config.json")
    if os.path.isdir(path) and os.path.exists(gen) and getattr(model, "generation_config", None) is not None:
        model.generation_config = transformers.GenerationConfig.from_pretrained(path)
    model.eval()
    return model
