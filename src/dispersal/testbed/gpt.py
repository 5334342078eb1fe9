"""A small GPT (nanoGPT-shaped): learned positions, pre-LayerNorm blocks, vocab 256 (bytes) or a BPE's.

Architecture as in Radford et al. 2019 (GPT-2) and Karpathy's nanoGPT: token + position
embeddings, ``n_layer`` blocks of causal self-attention and a 4x GELU MLP, final LayerNorm,
output head tied to the token embedding. No dropout, so a step is a pure function of
(weights, batch) and runs are bitwise reproducible on CPU.

``precision="bf16"`` runs the forward pass under bf16 autocast (Micikevicius et al. 2018,
arXiv 1710.03740, for mixed precision; bf16 needs no loss scaling): matrix products in bf16,
weights, gradients, the loss and the optimizer in fp32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

VOCAB_SIZE = 256  # byte-level tokenizer: a token is a byte
PRECISIONS = ("fp32", "bf16")


def param_count(n_layer: int, n_embd: int, block_size: int, vocab_size: int = VOCAB_SIZE) -> int:
    """Exact parameter count of :class:`GPT` (tied head), without building it.

    Embeddings ``V n + T n``; per block ``12 n^2 + 13 n`` (two LayerNorms 4n, qkv 3n^2 + 3n,
    projection n^2 + n, MLP 8n^2 + 5n); final LayerNorm ``2 n``.
    """
    n = n_embd
    return vocab_size * n + block_size * n + n_layer * (12 * n * n + 13 * n) + 2 * n


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 64
    block_size: int = 64
    vocab_size: int = VOCAB_SIZE


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x: Tensor) -> Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out: Tensor = self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return out


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(), nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        )

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        out: Tensor = x + self.mlp(self.ln2(x))
        return out


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig, precision: str = "fp32") -> None:
        super().__init__()
        if precision not in PRECISIONS:
            raise ValueError(f"precision: one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.cfg = cfg
        self.precision = precision
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.wte.weight  # weight tying (GPT-2)
        self.apply(self._init)
        # GPT-2 scales the residual projections by 1/sqrt(2 n_layer) at init.
        for name, p in self.named_parameters():
            if name.endswith(("attn.proj.weight", "mlp.2.weight")):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Logits (bf16 under bf16 autocast) and the mean cross-entropy (fp32) if ``targets`` given."""
        with torch.autocast(
            device_type=idx.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"
        ):
            return self._forward(idx, targets)

    def _forward(self, idx: Tensor, targets: Tensor | None) -> tuple[Tensor, Tensor | None]:
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        loss = (
            None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        )
        return logits, loss

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def configure_adamw(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (nanoGPT's split), betas (0.9, 0.95)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


def lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    """Linear warmup then cosine decay to 10% of peak (nanoGPT's schedule), step counted from 0."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))
