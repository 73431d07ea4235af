"""A stand-in for the part of transformers that vyrefs.transformers calls
(AutoConfig, GenerationConfig, a model class with _from_config and
tie_weights), for the host suite: Debian has no transformers. It checks
vyrefs' plumbing, not transformers; tests/gpu/gpu_attach_test.sh runs the real one."""
import json, os, torch
__version__ = "4.99.0"
class Config:
    def __init__(self, **kw): self.__dict__.update(kw)
    def save_pretrained(self, d):
        json.dump({k: v for k, v in self.__dict__.items() if not k.startswith("_")}, open(os.path.join(d, "config.json"), "w"))
class AutoConfig:
    @staticmethod
    def from_pretrained(path, trust_remote_code=False, return_unused_kwargs=False, **kw):
        c = Config(**json.load(open(os.path.join(path, "config.json"))))
        unused = {k: v for k, v in kw.items() if not hasattr(c, k)}
        for k, v in kw.items():
            if hasattr(c, k): setattr(c, k, v)
        return (c, unused) if return_unused_kwargs else c
class GenerationConfig:
    @staticmethod
    def from_pretrained(path): g = GenerationConfig(); g.__dict__.update(json.load(open(os.path.join(path, "generation_config.json")))); return g
class TinyLM(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config; self.generation_config = GenerationConfig()
        self.emb = torch.nn.Embedding(config.vocab, config.d)
        self.lin = torch.nn.Linear(config.d, config.d)
        self.head = torch.nn.Linear(config.d, config.vocab, bias=False)
        self.register_buffer("inv_freq", torch.arange(4, dtype=torch.float32) / 3, persistent=False)
        self.tie_weights()
    def tie_weights(self):
        if self.config.tie: self.head.weight = self.emb.weight
    @classmethod
    def _from_config(cls, config, **kw):
        assert "torch_dtype" in kw or not kw, kw
        return cls(config)
    def forward(self, x): return self.head(self.lin(self.emb(x)) * self.inv_freq.sum())
class AutoModelForCausalLM:
    pass
# A mixture of experts whose checkpoint holds one tensor per expert
# (experts.I.w) and whose model holds them fused (experts_w), as
# transformers 5 fuses Qwen3-MoE's and Mixtral's at load: its own
# from_pretrained converts; CONVERSIONS counts them in this process.
CONVERSIONS = []
BUILDS = []  # models built empty (_from_config), in this process
class TinyMoE(torch.nn.Module):
    _keep_in_fp32_modules = None
    def __init__(self, config):
        super().__init__()
        self.config = config; self.generation_config = GenerationConfig()
        self.emb = torch.nn.Embedding(config.vocab, config.d)
        self.experts_w = torch.nn.Parameter(torch.empty(config.experts, config.d, config.d))
        self.head = torch.nn.Linear(config.d, config.vocab, bias=False)
    def tie_weights(self): pass
    @classmethod
    def _from_config(cls, config, **kw):
        BUILDS.append(1)
        if "torch_dtype" in kw:  # as transformers does: the config says the dtype it was built in
            config.torch_dtype = str(kw["torch_dtype"]).replace("torch.", "")
        return cls(config)
    @classmethod
    def from_pretrained(cls, path, config=None, output_loading_info=False, device_map=None, state_dict=None, **kw):
        import vyrefs.torch
        if os.environ.get("STANDIN_OOM"):  # the GPU's room ends, as torch says it
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (stand-in)")
        sd = state_dict if state_dict is not None else vyrefs.torch.load_state_dict(path)
        model = cls(config or AutoConfig.from_pretrained(path))
        n = model.config.experts
        state = {"emb.weight": sd["emb.weight"].clone(), "head.weight": sd["head.weight"].clone(),
                 "experts_w": torch.stack([sd["experts.%d.w" % i] for i in range(n)])}
        missing = [k for k in model.state_dict() if k not in state]
        model.load_state_dict(state, strict=False)
        if state_dict is None:
            sd.close()
        CONVERSIONS.append(path)
        info = {"missing_keys": missing, "unexpected_keys": [], "mismatched_keys": []}
        return (model, info) if output_loading_info else model
    def forward(self, x):
        h = self.emb(x)
        return self.head(sum(h @ self.experts_w[i] for i in range(self.experts_w.shape[0])))
# A model that keeps a module in float32 whatever dtype is asked, as T5
# keeps its wo: its own load casts the rest and leaves head.weight float32.
class TinyKeep(TinyMoE):
    _keep_in_fp32_modules = ["head"]
    def __init__(self, config):
        torch.nn.Module.__init__(self)
        self.config = config; self.generation_config = GenerationConfig()
        self.emb = torch.nn.Embedding(config.vocab, config.d)
        self.head = torch.nn.Linear(config.d, config.vocab, bias=False)
    @classmethod
    def from_pretrained(cls, path, config=None, output_loading_info=False, device_map=None, state_dict=None,
                        torch_dtype=None, **kw):
        import vyrefs.torch
        sd = state_dict if state_dict is not None else vyrefs.torch.load_state_dict(path)
        model = cls(config or AutoConfig.from_pretrained(path))
        dt = torch_dtype if isinstance(torch_dtype, torch.dtype) else torch.float32
        model.emb.weight = torch.nn.Parameter(sd["emb.weight"].to(dt).clone())
        model.head.weight = torch.nn.Parameter(sd["head.weight"].float().clone())
        if state_dict is None:
            sd.close()
        CONVERSIONS.append(path)
        info = {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": []}
        return (model, info) if output_loading_info else model
    def forward(self, x):
        return self.head(self.emb(x).float())
# A quantized checkpoint whose method no quantizer here handles and whose
# own load needs a package this machine lacks: its load raises.
class TinyQuant(TinyMoE):
    @classmethod
    def from_pretrained(cls, path, **kw):
        raise ImportError("Using gptq quantization requires the optimum package: pip install optimum")
