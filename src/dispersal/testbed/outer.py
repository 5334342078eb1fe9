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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

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


# ---------------------------------------------------------------------- the outer step as a component
@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What the aggregation rule did with one update (the fields of robust.UpdateVerdict)."""

    index: int
    weight: float
    clipped: bool
    reason: str


class Rule(Protocol):
    """An aggregation rule (robust.Aggregator): updates -> (aggregate, one verdict per update)."""

    name: str

    def __call__(
        self, updates: Sequence[Tensor], *, score: Callable[[Tensor], float] | None = None
    ) -> tuple[Tensor, list[Any]]: ...


class MeanRule:
    """Plain averaging (DiLoCo's), with exactly the arithmetic the relay and every worker share:
    one update is taken as is, several are summed then divided (so both link modes give the same bits)."""

    name = "mean"

    def __call__(
        self, updates: Sequence[Tensor], *, score: Callable[[Tensor], float] | None = None
    ) -> tuple[Tensor, list[Any]]:
        n = len(updates)
        avg = updates[0] if n == 1 else torch.stack(list(updates)).sum(0) / n
        return avg, [Verdict(index=i, weight=1.0 / n, clipped=False, reason="") for i in range(n)]


def make_rule(name: str) -> Rule:
    """The aggregation rule called ``name`` (robust.py's table; "mean" is MeanRule)."""
    if name == "mean":
        return MeanRule()
    from dispersal.testbed import robust  # owned by the replicas work; imported only when asked for

    return cast(Rule, robust.make_aggregator(name))


class OuterOptimizer(Protocol):
    def step(self, theta: Tensor, delta: Tensor, index: Tensor | None = None) -> None: ...

    def state_dict(self) -> dict[str, Tensor]: ...

    def load_state_dict(self, state: dict[str, Tensor]) -> None: ...


class OuterStep:
    """The outer step of one round: aggregate the checked updates with ``rule``, then move the global
    weights with ``optimizer`` (NesterovOuter for DiLoCo). Both are swappable; tests pass fakes."""

    def __init__(self, rule: Rule, optimizer: OuterOptimizer) -> None:
        self.rule, self.optimizer = rule, optimizer

    def aggregate(
        self, updates: Sequence[Tensor], score: Callable[[Tensor], float] | None = None
    ) -> tuple[Tensor | None, list[Verdict]]:
        """The aggregate (None when there is nothing to apply) and one verdict per update."""
        if not updates:
            return None, []
        agg, raw = self.rule(updates, score=score) if score is not None else self.rule(updates)
        verdicts = [
            Verdict(index=v.index, weight=float(v.weight), clipped=bool(v.clipped), reason=str(v.reason))
            for v in raw
        ]
        if all(v.weight == 0 for v in verdicts) or not bool(torch.isfinite(agg).all()):
            return None, verdicts
        return agg, verdicts

    def apply(self, theta: Tensor, agg: Tensor, index: Tensor | None = None) -> None:
        self.optimizer.step(theta, agg, index)

    def rule_state(self) -> dict[str, Any]:
        """The rule's memory (the clip rule's recent norms), so a member that joins later aggregates
        exactly as the others do: it travels with the group's state and the checkpoints."""
        history = getattr(self.rule, "history", None)
        return {} if history is None else {"history": [[float(x) for x in h] for h in history]}

    def load_rule_state(self, state: dict[str, Any] | None) -> None:
        history = getattr(self.rule, "history", None)
        if history is not None and state and "history" in state:
            history.clear()
            history.extend([float(x) for x in h] for h in state["history"])


def combine_frames(
    frames: Sequence[tuple[str, Any]],
    *,
    secret: bytes,
    context: Callable[[str], bytes],
    codec: Any,
    numel: int,
    payload_bytes: int | None,
    outer: OuterStep,
    score: Callable[[Tensor], float] | None = None,
    own: str | None = None,
    keep: list[Tensor] | None = None,
) -> tuple[Tensor | None, list[dict[str, Any]]]:
    """Check every frame (wire.open_frame) and aggregate the good ones with ``outer``'s rule.

        ``frames``: (sender, frame) in any order; they are taken in worker order. Returns the aggregate
        (None if nothing is left) and one info per frame: worker, header (a blank one when it cannot be
        trusted), trusted, ok, why, clipped, weight. The same function runs on every worker (virtual-clock
        mode) and in the relay (real-link mode), so both give the same bits. ``own``: the caller's own
        worker id (its own frame's tags are not recomputed, wire.open_frame). ``keep``: receives the other
    members' good updates (decoded), in worker order."""
    from dispersal.testbed.wire import blank_header, open_frame

    infos: list[dict[str, Any]] = []
    valid: list[Tensor] = []
    where: list[int] = []
    for sender, f in sorted(frames, key=lambda sf: int(sf[0][1:])):
        h, v, why = open_frame(
            f,
            secret=secret,
            context=context(sender),
            sender_index=int(sender[1:]),
            codec=codec,
            numel=numel,
            payload_bytes=payload_bytes,
            own=sender == own,
        )
        info = {
            "worker": sender,
            "header": h if h is not None else blank_header(int(sender[1:])),
            "trusted": h is not None,
            "ok": v is not None,
            "why": why,
            "clipped": False,
            "weight": 0.0,
        }
        if v is not None:
            where.append(len(infos))
            valid.append(v)
            if keep is not None and sender != own:
                keep.append(v)
        infos.append(info)
    agg, verdicts = outer.aggregate(valid, score)
    for verdict in verdicts:
        info = infos[where[verdict.index]]
        info["weight"] = verdict.weight
        if verdict.weight == 0:
            info["ok"], info["why"] = False, verdict.reason or "rejected by the rule"
        elif verdict.clipped:
            info["clipped"], info["why"] = True, verdict.reason or "clipped"
    return agg, infos


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
