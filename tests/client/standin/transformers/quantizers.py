"""The stand-in's transformers.quantizers: "int8" replaces TinyLM's `lin`
with a QLinear holding an int8 weight and its float32 scale (as
fine-grained FP8 replaces a Linear with FP8Linear: a float8 weight and its
block scales); "fp8" needs a package this machine lacks (its environment
check says so); any other method is not this transformers' own (its load
decides)."""
import torch

POSTPROCESSED = []  # models the after-load step ran on, in this process
PREPROCESSED = []  # the keyword arguments each module replacement was given


class QLinear(torch.nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(o, i, dtype=torch.int8), requires_grad=False)
        self.weight_scale_inv = torch.nn.Parameter(torch.empty(o, 1, dtype=torch.float32), requires_grad=False)
        self.bias = torch.nn.Parameter(torch.empty(o))

    def forward(self, x):
        return x @ (self.weight.float() * self.weight_scale_inv).t().to(x.dtype) + self.bias


class Quantizer:
    def __init__(self, qc):
        self.quantization_config = qc

    def validate_environment(self, device_map=None, weights_only=True):
        if self.quantization_config["quant_method"] == "fp8":
            raise ImportError("Using fp8 quantization requires the kernels package: pip install kernels")

    def update_dtype(self, dtype):
        return dtype

    def preprocess_model(self, model, dtype=None, **kwargs):
        PREPROCESSED.append(dict(kwargs, dtype=dtype))
        model.is_quantized = True
        model.lin = QLinear(model.lin.in_features, model.lin.out_features)

    def postprocess_model(self, model):
        POSTPROCESSED.append(model)


class AutoHfQuantizer:
    @staticmethod
    def supports_quant_method(qc):
        return qc.get("quant_method") in ("int8", "fp8")

    @staticmethod
    def from_config(qc, pre_quantized=False):
        assert pre_quantized
        return Quantizer(qc)
