"""What travels between workers: the sync frame and the state bundle, both authenticated, neither pickled.

A **frame** (one worker's update for one round)::

    header      10 x float64  emulation metadata (below); the CRC32 is the one field a real system sends
    payload     codec bytes   the encoded update (codecs.py)
    header tag  32 bytes      HMAC-SHA256(secret, context, header)
    frame tag   32 bytes      HMAC-SHA256(secret, context, header, payload)

context = "frame/<generation>/<round>/<part>/<sender>". :func:`open_frame` checks, in this order, and
never raises: length, tags (so a forged, replayed or re-addressed frame is dropped before anything else
is read; a header whose own tag holds is still believed for the accounting when only the payload was
damaged), header values (finite, integral where they are counters, the sender's index), CRC32,
decoding, finiteness of every value. Only then does the update reach the aggregation (outer.py).

A **bundle** (the group's state sent to a (re)joining member, and nothing else): a JSON manifest
(dicts, lists, numbers, strings; tensors stand in as ``{"t": i}``) followed by the tensors' raw bytes
in a closed list of dtypes, plus the same kind of tag. No pickle: torch's ``broadcast_object_list``
unpickles what a peer sends, so a hostile peer could run code in every member.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from typing import Any

import torch

from dispersal.testbed.codecs import CRC_BYTES
from dispersal.testbed.secure import MAC_BYTES, mac, verify

__all__ = ["CRC_BYTES"]

# Header fields (float64) sent with every frame; emulation metadata, not charged to the link
# except the CRC32 (CRC_BYTES), which a real system would send too. The 32-byte tag is not charged
# either: a real system would send a MAC in place of the CRC (a 28-byte difference per sync).
H_CRC, H_GEN, H_ARRIVAL, H_LOSS, H_COMPUTE, H_EXPOSED, H_CLOCK, H_SENT, H_RECV, H_INDEX = range(10)
HEADER_LEN = 10
HEADER_BYTES = 8 * HEADER_LEN
TAGS_BYTES = 2 * MAC_BYTES
"""The two tags after the payload."""
MAX_COUNTER = 2.0**53
"""Largest integer a float64 header field holds exactly: any counter above it is a forgery."""


def frame_context(gen: int, round_index: int, part: int, sender: str) -> bytes:
    """What a frame's tag binds besides its bytes: replaying it in another round, generation,
    fragment or under another sender's name fails the tag."""
    return f"frame/{gen}/{round_index}/{part}/{sender}".encode()


def seal_frame(header: torch.Tensor, payload: torch.Tensor, secret: bytes, context: bytes) -> torch.Tensor:
    """header (float64) + payload (uint8) + header tag + frame tag, as one uint8 tensor."""
    hb = header.to(torch.float64).contiguous().view(torch.uint8)
    # numpy declares ndarray.__buffer__ (PEP 688) only for Python >= 3.12; it is a buffer on 3.11 too.
    tag_h = mac(secret, context, hb.numpy())  # type: ignore[arg-type]
    tag_f = mac(secret, context, hb.numpy(), payload.contiguous().numpy())  # type: ignore[arg-type]
    return torch.cat([hb, payload, torch.frombuffer(bytearray(tag_h + tag_f), dtype=torch.uint8)])


def check_payload(payload: torch.Tensor, crc: int, codec: Any, numel: int) -> tuple[torch.Tensor | None, str]:
    """Decode a received payload, or say why it is left out: CRC32 mismatch, undecodable, non-finite."""
    # numpy declares ndarray.__buffer__ (PEP 688) only for Python >= 3.12, so mypy at 3.11 rejects an
    # ndarray as a buffer; it has the buffer protocol on every version.
    if zlib.crc32(payload.numpy()) != crc:  # type: ignore[arg-type]
        return None, "checksum"
    try:
        v = codec.decode(payload, numel)
    except (ValueError, RuntimeError, IndexError) as exc:
        return None, f"undecodable: {exc}"[:120]
    if v.numel() != numel:
        return None, "undecodable: wrong length"
    # If the sum is finite, every value is (a NaN or an unmatched inf would make it non-finite);
    # only when it is not (or on overflow) look at every value.
    if not torch.isfinite(v.sum()) and not torch.isfinite(v).all():
        return None, "non-finite"
    return v, ""


def header_problem(h: list[float], sender_index: int | None) -> str:
    """Why a frame header cannot be trusted as numbers ("" if it can)."""
    # The reported training loss may be non-finite (an honest member of a diverged run says so);
    # every other field is a count, a time or an index.
    if len(h) != HEADER_LEN or not all(math.isfinite(x) for i, x in enumerate(h) if i != H_LOSS):
        return "bad header: non-finite field"
    for i in (H_CRC, H_GEN, H_INDEX, H_SENT, H_RECV):
        if h[i] < 0 or h[i] != int(h[i]) or h[i] >= MAX_COUNTER:
            return "bad header: counter out of range"
    if h[H_CRC] >= 2**32:
        return "bad header: counter out of range"
    if sender_index is not None and int(h[H_INDEX]) != sender_index:
        return f"bad header: claims to be w{int(h[H_INDEX])}"
    return ""


def open_frame(
    frame: torch.Tensor | bytes | bytearray,
    *,
    secret: bytes,
    context: bytes,
    sender_index: int | None,
    codec: Any,
    numel: int,
    payload_bytes: int | None,
    own: bool = False,
) -> tuple[list[float] | None, torch.Tensor | None, str]:
    """(header, decoded update, "") for a good frame, else (header or None, None, reason). Never raises.

    ``payload_bytes``: the exact payload size this round's frames must have (None: any size, for
    codecs whose payload varies). ``own``: this process sealed the frame itself (its copy never left
    it), so the tags are not recomputed; every other check runs, so every member reaches the same
    verdict on it (a payload the fault plan damaged still fails its CRC32)."""
    t = frame if isinstance(frame, torch.Tensor) else torch.frombuffer(bytearray(frame), dtype=torch.uint8)
    t = t.reshape(-1).to(torch.uint8)
    if t.numel() < HEADER_BYTES + TAGS_BYTES or (
        payload_bytes is not None and t.numel() != HEADER_BYTES + payload_bytes + TAGS_BYTES
    ):
        return None, None, f"bad length {t.numel()}"
    hb, payload = t[:HEADER_BYTES], t[HEADER_BYTES:-TAGS_BYTES]
    tag_h, tag_f = t[-TAGS_BYTES:-MAC_BYTES].numpy().tobytes(), t[-MAC_BYTES:].numpy().tobytes()
    if not own and not verify(secret, tag_h, context, hb.numpy()):  # type: ignore[arg-type]
        return None, None, "unauthenticated"
    h = hb.clone().view(torch.float64).tolist()
    why = header_problem(h, sender_index)
    if why:
        return None, None, why
    if not own and not verify(secret, tag_f, context, hb.numpy(), payload.numpy()):  # type: ignore[arg-type]
        return h, None, _why_unauthenticated(hb, payload)
    v, why = check_payload(payload, int(h[H_CRC]), codec, numel)
    return h, v, why


def _why_unauthenticated(hb: torch.Tensor, payload: torch.Tensor) -> str:
    """A payload whose tag fails under a genuine header: "checksum" when the header's CRC does not match
    the payload either (damaged in transit), else "unauthenticated" (replaced by someone else)."""
    crc = hb.clone().view(torch.float64)[H_CRC].item()
    damaged = math.isfinite(crc) and crc != zlib.crc32(payload.numpy())  # type: ignore[arg-type]
    return "checksum" if damaged else "unauthenticated"


def blank_header(sender_index: int) -> list[float]:
    """Stand-in header of a frame whose own header cannot be trusted: only the sender is known."""
    h = [0.0] * HEADER_LEN
    h[H_INDEX] = float(sender_index)
    return h


def frame_payload(frame: torch.Tensor) -> torch.Tensor:
    return frame[HEADER_BYTES:-TAGS_BYTES]


# ---------------------------------------------------------------------- state bundles
_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "int64": torch.int64,
    "int32": torch.int32,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}
_LEN = struct.Struct("!Q")
MAX_MANIFEST_BYTES = 16 << 20


def pack_bundle(tree: Any, secret: bytes, context: bytes) -> bytes:
    """Serialise dicts / lists / numbers / strings / None / tensors (no pickle) and tag them."""
    blobs: list[bytes] = []

    def enc(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            t = x.detach().cpu().contiguous()
            blobs.append(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
            return {"t": len(blobs) - 1, "dtype": _NAMES[t.dtype], "shape": list(t.shape)}
        if isinstance(x, dict):
            return {"d": [[k, enc(v)] for k, v in x.items()]}
        if isinstance(x, (list, tuple)):
            return {"l": [enc(v) for v in x]}
        if isinstance(x, float) and not math.isfinite(x):
            return {"f": repr(x)}
        if x is None or isinstance(x, (bool, int, float, str)):
            return {"v": x}
        raise TypeError(f"bundle: cannot carry {type(x).__name__}")

    manifest = json.dumps(
        {"root": enc(tree), "sizes": [len(b) for b in blobs]}, separators=(",", ":")
    ).encode()
    body = _LEN.pack(len(manifest)) + manifest + b"".join(blobs)
    return body + mac(secret, context, body)


def unpack_bundle(data: bytes | bytearray, secret: bytes, context: bytes) -> Any:
    """Inverse of :func:`pack_bundle`; ValueError on a bad tag or a malformed bundle."""
    if len(data) < _LEN.size + MAC_BYTES:
        raise ValueError("bundle: too short")
    body, tag = memoryview(data)[:-MAC_BYTES], bytes(data[-MAC_BYTES:])
    if not verify(secret, tag, context, body):
        raise ValueError("bundle: unauthenticated")
    (n,) = _LEN.unpack(body[: _LEN.size])
    if n > MAX_MANIFEST_BYTES or _LEN.size + n > len(body):
        raise ValueError("bundle: bad manifest length")
    try:
        manifest = json.loads(bytes(body[_LEN.size : _LEN.size + n]))
        sizes = [int(s) for s in manifest["sizes"]]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ValueError(f"bundle: bad manifest ({exc})") from None
    if any(s < 0 for s in sizes) or _LEN.size + n + sum(sizes) != len(body):
        raise ValueError("bundle: sizes do not match the body")
    offsets = [_LEN.size + n]
    for s in sizes:
        offsets.append(offsets[-1] + s)

    def dec(x: Any) -> Any:
        if not isinstance(x, dict) or len(x) == 0:
            raise ValueError("bundle: bad node")
        if "t" in x:
            i, dtype, shape = int(x["t"]), _DTYPES[str(x["dtype"])], [int(s) for s in x["shape"]]
            raw = bytearray(body[offsets[i] : offsets[i + 1]])
            count = math.prod(shape)
            if len(raw) != count * torch.empty((), dtype=dtype).element_size():
                raise ValueError("bundle: tensor size does not match its shape")
            if count == 0:
                return torch.zeros(shape, dtype=dtype)
            return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)
        if "d" in x:
            return {k if isinstance(k, (str, int)) else str(k): dec(v) for k, v in x["d"]}
        if "l" in x:
            return [dec(v) for v in x["l"]]
        if "f" in x:
            return float(x["f"])
        return x["v"]

    try:
        return dec(manifest["root"])
    except (KeyError, IndexError, TypeError, RecursionError) as exc:
        raise ValueError(f"bundle: malformed ({exc!r})") from None
