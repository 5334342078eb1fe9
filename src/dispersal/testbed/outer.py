"""The outer optimizer and the flat-vector plumbing shared by the algorithms.

DiLoCo (Douillard et al. 2023, arXiv 2311.08105, Algorithm 1): after H inner steps each worker's
pseudo-gradient is ``delta_m = theta_global - theta_m``; the outer optimizer applies the mean
``delta`` with SGD + Nesterov momentum (paper: lr 0.7, momentum 0.9)::

    b     <- mu * b + delta                   (b starts at 0, as torch.optim.SGD)
    theta <- theta - lr * (delta + mu * b)

Streaming DiLoCo (Douillard et al. 2025, arXiv 2501.18512) runs the same step on one fragment's
indices at a time.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn


class NesterovOuter:
    """SGD with Nesterov momentum on a flat fp32 vector (optionally on a subset of indices)."""

    def __init__(self, numel: int, lr: float = 0.7, momentum: float = 0.9) -> None:
        self.lr, self.momentum = lr, momentum
        self.buf = torch.zeros(numel)

    def step(self, theta: Tensor, delta: Tensor, index: Tensor | None = None) -> None:
        """In place: ``theta`` (full flat vector) moves by the Nesterov update of ``delta``."""
        if index is None:
            self.buf.mul_(self.momentum).add_(delta)
            theta.sub_(self.lr * (delta + self.momentum * self.buf))
        else:
            b = self.buf[index].mul_(self.momentum).add_(delta)
            self.buf[index] = b
            theta[index] = theta[index] - self.lr * (delta + self.momentum * b)

    def state_dict(self) -> dict[str, Tensor]:
        return {"buf": self.buf.clone()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.buf = state["buf"].clone()


Params = nn.Module | list[nn.Parameter]


def _params(model: Params) -> list[nn.Parameter]:
    """The parameter list (a cached list avoids walking the module tree at every step)."""
    return model if isinstance(model, list) else list(model.parameters())


def flat_params(model: Params) -> Tensor:
    """The parameters as one flat vector in host memory (no copy beyond the cat on CPU)."""
    return torch.cat([p.detach().reshape(-1) for p in _params(model)]).cpu()


def set_flat_params(model: Params, flat: Tensor) -> None:
    """Copy ``flat`` into the parameters. (``vector_to_parameters`` would make them *views* of ``flat``,
    so later inner steps would silently rewrite the global weights too.)"""
    offset = 0
    with torch.no_grad():
        for p in _params(model):
            n = p.numel()
            p.copy_(flat[offset : offset + n].view_as(p))
            offset += n


def flat_grads(model: Params) -> Tensor:
    return torch.cat([cast(Tensor, p.grad).reshape(-1) for p in _params(model)]).cpu()


def set_flat_grads(model: Params, flat: Tensor) -> None:
    """Gradients become views of ``flat`` (no copy): the caller hands over a fresh tensor it no longer uses."""
    offset = 0
    for p in _params(model):
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).to(p.device)  # a view on CPU, a copy to a GPU
        offset += n


def fragment_indices(model: nn.Module, fragments: int) -> list[Tensor]:
    """Split the flat parameter vector into P fragments, strided over transformer blocks.

    Block i goes to fragment i mod P (the paper's strided pattern, arXiv 2501.18512 sec. 2.2);
    embeddings join fragment 0 and everything after the blocks joins fragment P-1.
    """
    parts: list[list[Tensor]] = [[] for _ in range(fragments)]
    offset = 0
    for name, p in model.named_parameters():
        n = p.numel()
        if name.startswith("blocks."):
            frag = int(name.split(".")[1]) % fragments
        elif name.startswith(("wte", "wpe")):
            frag = 0
        else:
            frag = fragments - 1
        parts[frag].append(torch.arange(offset, offset + n))
        offset += n
    return [torch.cat(p) if p else torch.zeros(0, dtype=torch.long) for p in parts]
