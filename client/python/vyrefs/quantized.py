"""A checkpoint saved quantized (its config has a quantization_config:
fine-grained FP8 weights with their block scales, ...): the model is built
with transformers' own quantizer, which replaces its modules before any
weight exists (FP8Linear with `weight` in float8 and `weight_scale_inv`),
so the files' stored tensors and scales attach as they are: no
dequantized copy. Issue "families".

    q = quantizer(transformers, config, gpu)   # None: not quantized
    dtype = model_dtype(q, config) or ...      # "auto": the config's, not the files' order
    ... build the model inside vyrefs.torch.empty_weights(), then
    prepare(q, model, dtype, gpu) inside it too; attach(model, as_built(model, sd, strict)[0])
    finish(q, model)                           # after tying and placement, as transformers runs it
"""

import torch

from . import torch as _vt


def method(config):
    """The checkpoint's quantization method ("fp8", ...), or None."""
    quant = getattr(config, "quantization_config", None)
    if isinstance(quant, dict):
        return quant.get("quant_method", "unnamed")
    return getattr(quant, "quant_method", None) if quant is not None else None


def _device_map(gpu):
    return {"": gpu if gpu is not None else "cpu"}


def quantizer(transformers, config, gpu):
    """transformers' quantizer for a pre-quantized checkpoint (None for one
    that is not), its environment checked as its own from_pretrained
    checks it: a package it needs and the machine lacks raises
    ImportError here, before a model is built."""
    if method(config) is None:
        return None
    try:
        from transformers.quantizers import AutoHfQuantizer
    except ImportError:
        return None  # a transformers without quantizers: its own load decides
    if not AutoHfQuantizer.supports_quant_method(config.quantization_config):
        return None  # transformers itself loads it as if not quantized
    q = AutoHfQuantizer.from_config(config.quantization_config, pre_quantized=True)
    q.validate_environment(device_map=_device_map(gpu), weights_only=True)
    return q


def castable(dtype):
    """A dtype a model computes in (bf16, fp16, fp32, ...), not quantized
    storage (float8, int8, packed integers), which is never cast."""
    return dtype.is_floating_point and torch.empty((), dtype=dtype).element_size() > 1


def model_dtype(q, config):
    """dtype "auto" of a quantized checkpoint: the one its config names,
    as transformers' "auto" reads it (its files hold float8 or integer
    weights and float32 scales beside the model's tensors: their order
    says nothing), passed through the quantizer's update_dtype; None
    where the config names none."""
    d = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if isinstance(d, str):
        d = getattr(torch, d.replace("torch.", ""), None)
    if not isinstance(d, torch.dtype) or not castable(d):
        return None
    return q.update_dtype(d)


def prepare(q, model, dtype, gpu):
    """The model's modules replaced by the quantizer's (inside
    empty_weights: their tensors are on meta until attached). Modules the
    model keeps in float32 are not converted (transformers 5 reads them
    from the model; older quantizers take them as an argument)."""
    keep = sorted(getattr(model, "_keep_in_fp32_modules", None) or [])
    q.preprocess_model(model=model, config=model.config, dtype=dtype, device_map=_device_map(gpu),
                       keep_in_fp32_modules=keep)


def as_built(model, sd, strict):
    """(sd with each tensor in the dtype the quantized model built for it,
    as transformers casts a tensor to its parameter's: float8 or integer
    weights and their scales stay as stored; a model tensor stored in
    another compute dtype is converted (a copy, its room checked first). A
    tensor whose stored dtype or the model's is quantized storage and the
    other differs is refused: the files are not quantized as the config
    says. With strict, files holding names the model lacks are given back
    unchanged, before any copy (attach then says which); and the bytes the
    conversions copied)."""
    want = model.state_dict(keep_vars=True)
    if strict and any(name not in want for name in sd):
        return sd, 0
    casts, refused, need = [], [], {}
    for name, t in sd.items():
        old = want.get(name)
        if old is None or old.dtype == t.dtype:
            continue
        if not (castable(old.dtype) and castable(t.dtype)):
            refused.append("%s (the files' %s, the model's %s)" % (name, t.dtype, old.dtype))
            continue
        casts.append(name)
        need[t.device] = need.get(t.device, 0) + t.numel() * old.element_size()
    if refused:
        raise ValueError("vyrefs: the files do not hold the quantized tensors their config describes: %s (Fix: "
                         "save the model again with its quantizer, or remove quantization_config from config.json "
                         "if the files are not quantized)" % _vt._shown(refused, 5))
    _vt._check_room(need)
    out, copied = dict(sd), 0
    for name in casts:
        out[name] = sd[name].to(want[name].dtype)
        copied += out[name].numel() * out[name].element_size()
    return out, copied


def finish(q, model):
    """What transformers' own load does after the weights: the quantizer
    kept on the model, its after-load step run."""
    model.hf_quantizer = q
    q.postprocess_model(model)
