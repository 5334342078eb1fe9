"""What goes on the wire: small codecs behind one Protocol, each reporting the exact bytes it sends.

Every codec maps a flat fp32 tensor to a ``uint8`` buffer (the payload) and back. ``len(buffer)``
is the byte count charged to the link: values, block scales and indices included. Sizes for n values:

=======  ==========================================  ==================================
codec    payload bytes                               round-trip error (per value)
=======  ==========================================  ==================================
none     4 n                                         0 (fp32 as is)
bf16     2 n                                         <= 2^-8 |x| (round to nearest even)
int8     n + 4 ceil(n / B)                           <= max|x in block| / 254
int4     ceil(n / 2) + 4 ceil(n / B)                 <= max|x in block| / 14
topk     8 k, k = ceil(f n) (int32 index + fp32)     error feedback keeps the rest for later
=======  ==========================================  ==================================

Block-wise absmax scaling follows Dettmers et al. 2022 (8-bit optimizers, arXiv 2110.02861);
top-k with error feedback follows Stich et al. 2018 (arXiv 1809.07599) / Lin et al. 2018 (DGC).
``encode_average`` is what a relay sends back down: the mean re-encoded (dense codecs) or, for
top-k, the exact union of the workers' sparse updates (indices + values of the nonzeros).
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import Tensor

CRC_BYTES = 4  # a CRC32 travels with every payload (see worker.frame); charged to the link too


class Codec(Protocol):
    name: str

    def encode(self, x: Tensor) -> Tensor:
        """fp32 vector -> uint8 payload (may update internal error-feedback state)."""
        ...

    def decode(self, payload: Tensor, numel: int) -> Tensor:
        """uint8 payload -> fp32 vector of length ``numel``."""
        ...

    def nbytes(self, numel: int) -> int:
        """Exact payload size for ``numel`` values."""
        ...

    def encode_average(self, avg: Tensor) -> Tensor:
        """Payload a relay sends down for the averaged update."""
        ...


def _as_bytes(t: Tensor) -> Tensor:
    return t.contiguous().view(torch.uint8).reshape(-1)


class NoneCodec:
    """fp32 as is: 4 bytes per value."""

    name = "none"

    def encode(self, x: Tensor) -> Tensor:
        """May alias ``x`` (no copy): callers pass a fresh vector and frame it (a copy) right away."""
        return _as_bytes(x.detach().float())

    def decode(self, payload: Tensor, numel: int) -> Tensor:
        """A view of ``payload`` (no copy): received frames are fresh buffers owned by the receiver."""
        return payload.view(torch.float32)[:numel]

    def nbytes(self, numel: int) -> int:
        return 4 * numel

    def encode_average(self, avg: Tensor) -> Tensor:
        return self.encode(avg)


class Bf16Codec(NoneCodec):
    """bfloat16 (8 exponent, 7 mantissa bits): 2 bytes per value, relative error <= 2^-8."""

    name = "bf16"

    def encode(self, x: Tensor) -> Tensor:
        return _as_bytes(x.detach().to(torch.bfloat16))

    def decode(self, payload: Tensor, numel: int) -> Tensor:
        return payload.view(torch.bfloat16)[:numel].float()

    def nbytes(self, numel: int) -> int:
        return 2 * numel


class BlockQuantCodec:
    """Symmetric block-wise integer quantization: one fp32 scale (absmax / qmax) per block of B values.

    ``bits`` = 8 stores int8 in [-127, 127]; ``bits`` = 4 stores [-7, 7] packed two per byte.
    """

    def __init__(self, bits: int, block: int = 64) -> None:
        if bits not in (4, 8):
            raise ValueError("bits: 4 or 8")
        self.bits, self.block = bits, block
        self.qmax = 127 if bits == 8 else 7
        self.name = f"int{bits}"

    def _blocks(self, numel: int) -> int:
        return math.ceil(numel / self.block)

    def nbytes(self, numel: int) -> int:
        values = numel if self.bits == 8 else math.ceil(numel / 2)
        return values + 4 * self._blocks(numel)

    def encode(self, x: Tensor) -> Tensor:
        x = x.detach().float().reshape(-1)
        n, nb = x.numel(), self._blocks(x.numel())
        padded = torch.zeros(nb * self.block)
        padded[:n] = x
        blocks = padded.view(nb, self.block)
        scale = blocks.abs().amax(dim=1) / self.qmax
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        q = torch.round(blocks / safe[:, None]).clamp_(-self.qmax, self.qmax).to(torch.int8).reshape(-1)[:n]
        if self.bits == 4:
            u = (q + 8).to(torch.uint8)  # 1..15, offset binary
            if n % 2:
                u = torch.cat([u, torch.tensor([8], dtype=torch.uint8)])
            q_bytes = u[0::2] | (u[1::2] << 4)
        else:
            q_bytes = q.view(torch.uint8)
        return torch.cat([_as_bytes(scale.float()), q_bytes])

    def decode(self, payload: Tensor, numel: int) -> Tensor:
        nb = self._blocks(numel)
        scale = payload[: 4 * nb].clone().view(torch.float32)
        body = payload[4 * nb :]
        if self.bits == 4:
            lo, hi = (body & 0x0F).to(torch.int16), (body >> 4).to(torch.int16)
            q = torch.stack([lo, hi], dim=1).reshape(-1)[:numel] - 8
        else:
            q = body.clone().view(torch.int8)[:numel].to(torch.int16)
        idx = torch.arange(numel) // self.block
        return q.float() * scale[idx]

    def encode_average(self, avg: Tensor) -> Tensor:
        return self.encode(avg)


class TopKCodec:
    """Top-k by magnitude with error feedback: send k = ceil(f n) (int32 index, fp32 value) pairs.

    The residual (what was not sent) is added to the next input, so nothing is lost, only delayed:
    after ``encode``, decode(payload) + residual == input + previous residual exactly.
    """

    name = "topk"

    def __init__(self, fraction: float = 0.01, error_feedback: bool = True) -> None:
        self.fraction = fraction
        self.error_feedback = error_feedback
        self.residual: Tensor | None = None

    def k(self, numel: int) -> int:
        return max(1, math.ceil(self.fraction * numel))

    def nbytes(self, numel: int) -> int:
        return 8 * self.k(numel)

    def encode(self, x: Tensor) -> Tensor:
        x = x.detach().float().reshape(-1)
        acc = x + self.residual if (self.error_feedback and self.residual is not None) else x.clone()
        idx = torch.topk(acc.abs(), self.k(acc.numel()), sorted=False).indices.sort().values
        values = acc[idx].clone()
        if self.error_feedback:
            acc[idx] = 0.0
            self.residual = acc
        return self._pack(idx.to(torch.int32), values)

    @staticmethod
    def _pack(idx: Tensor, values: Tensor) -> Tensor:
        return torch.cat([_as_bytes(idx.to(torch.int32)), _as_bytes(values.float())])

    def decode(self, payload: Tensor, numel: int) -> Tensor:
        k = payload.numel() // 8
        idx = payload[: 4 * k].clone().view(torch.int32).long()
        values = payload[4 * k :].clone().view(torch.float32)
        out = torch.zeros(numel)
        if k and (idx.min() < 0 or idx.max() >= numel):
            raise ValueError("topk payload: index out of range")
        out[idx] = values
        return out

    def encode_average(self, avg: Tensor) -> Tensor:
        idx = torch.nonzero(avg, as_tuple=False).reshape(-1)
        return self._pack(idx.to(torch.int32), avg[idx])

    def state_dict(self) -> dict[str, Tensor | None]:
        return {"residual": self.residual}

    def load_state_dict(self, state: dict[str, Tensor | None]) -> None:
        self.residual = state.get("residual")


def make_codec(name: str, *, block: int = 64, topk_fraction: float = 0.01) -> Codec:
    if name == "none":
        return NoneCodec()
    if name == "bf16":
        return Bf16Codec()
    if name == "int8":
        return BlockQuantCodec(8, block)
    if name == "int4":
        return BlockQuantCodec(4, block)
    if name == "topk":
        return TopKCodec(topk_fraction)
    raise ValueError(f"codec: one of none, bf16, int8, int4, topk; got {name!r}")
