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
