"""Small torch.nn models for the attach suites (tests/client/attach_test.sh,
tests/gpu/gpu_attach_test.sh), made the same in every process from a seed.

  Net: a tied embedding and head, a LayerNorm, two Linear layers, a
  persistent int64 buffer (steps) and a non-persistent one (table, which
  no file holds: attach must keep its values and move it).
"""
import hashlib

import torch


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 2 * d)
        self.down = torch.nn.Linear(2 * d, d, bias=False)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


class Net(torch.nn.Module):
    def __init__(self, vocab=512, d=64, layers=3):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList(Block(d) for _ in range(layers))
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight  # tied
        self.register_buffer("steps", torch.arange(7, dtype=torch.int64))
        self.register_buffer("table", torch.linspace(0.5, 1.5, d), persistent=False)

    def forward(self, ids):
        x = self.emb(ids) * self.table
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def make(seed=1, **kw):
    """Net with weights drawn from `seed` (the same in any process)."""
    torch.manual_seed(seed)
    net = Net(**kw)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn_like(p))
    return net.eval()


def ids(vocab=512, n=32):
    g = torch.Generator().manual_seed(7)
    return torch.randint(0, vocab, (2, n), generator=g)


def digest(t):
    """sha256 of a tensor's bytes, for bit-for-bit comparisons."""
    t = t.detach().contiguous().cpu()
    return hashlib.sha256(t.view(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def digests(module_or_dict):
    sd = module_or_dict.state_dict() if isinstance(module_or_dict, torch.nn.Module) else module_or_dict
    return {k: digest(v) for k, v in sd.items()}
