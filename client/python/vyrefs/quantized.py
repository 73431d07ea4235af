"""A checkpoint saved quantized (its config has a quantization_config:
fine-grained FP8 weights with their block scales, ...): the model is built
with transformers' own quantizer, which replaces its modules before any
weight exists (FP8Linear with `weight` in float8 and `weight_scale_inv`),
so the files' stored tensors and scales attach as they are: no
dequantized copy. Issue "families".

    q = quantizer(transformers, config, gpu)   # None: not quantized
    ... build the model inside vyrefs.torch.empty_weights(), then
    prepare(q, model, dtype, gpu) inside it too; attach(model, as_built(model, sd))
    finish(q, model)
"""

import torch


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


def prepare(q, model, dtype, gpu):
    """The model's modules replaced by the quantizer's (inside
    empty_weights: their tensors are on meta until attached)."""
    q.preprocess_model(model=model, dtype=dtype, device_map=_device_map(gpu))


def as_built(model, sd):
    """sd with each tensor in the dtype the quantized model built for it
    (float8 weights and float32 scales stay as stored; a non-quantized
    tensor asked in another dtype is converted: a copy), as transformers
    casts each tensor to its parameter's dtype."""
    want = {name: t.dtype for name, t in model.state_dict(keep_vars=True).items()}
    out = {}
    for name, t in sd.items():
        dt = want.get(name)
        out[name] = t.to(dt) if dt is not None and dt != t.dtype and t.is_floating_point() else t
    return out


def finish(q, model):
    """What transformers' own load does after the weights: the quantizer
    kept on the model, its after-load step run."""
    model.hf_quantizer = q
    q.postprocess_model(model)
