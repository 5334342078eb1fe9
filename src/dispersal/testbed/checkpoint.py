"""Atomic checkpoints: global state (weights, outer optimizer, round = data position) + one file per worker.

Layout under ``OUT/ckpt``::

    r000040/global.pt     global weights, outer optimizer, round, tokens, per-worker counters
    r000040/w0.pt ...     each worker's local weights, inner AdamW, codec residual, link counters
    LATEST                "r000040", replaced atomically only after every file above is in place

Batches are a pure function of (seed, worker, step), so the round number *is* the data position;
torch's global RNG state is stored anyway for completeness.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch


def _atomic_save(obj: Any, path: Path, midway: Callable[[], None] | None = None) -> None:
    """Write to a temporary name, fsync, rename over ``path``. ``midway`` (fault injection: a kill
    during the write) is called after half of the bytes are on disk; a process killed there leaves
    only the temporary file, never a partial ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data[: len(data) // 2])
        if midway is not None:
            fh.flush()
            midway()
        fh.write(data[len(data) // 2 :])
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def round_dir(out: Path, round_index: int) -> Path:
    return out / "ckpt" / f"r{round_index:06d}"


def save_worker(
    out: Path, round_index: int, worker: str, state: dict[str, Any], midway: Callable[[], None] | None = None
) -> None:
    _atomic_save(state, round_dir(out, round_index) / f"{worker}.pt", midway)


def save_global(
    out: Path, round_index: int, state: dict[str, Any], midway: Callable[[], None] | None = None
) -> None:
    """Write global.pt, then point LATEST at this round (both atomic; LATEST last)."""
    d = round_dir(out, round_index)
    _atomic_save({**state, "torch_rng": torch.get_rng_state()}, d / "global.pt", midway)
    tmp = out / "ckpt" / f".LATEST.{os.getpid()}.tmp"
    tmp.write_text(d.name)
    os.replace(tmp, out / "ckpt" / "LATEST")


def latest(out: Path) -> Path | None:
    p = out / "ckpt" / "LATEST"
    if not p.exists():
        return None
    d = out / "ckpt" / p.read_text().strip()
    return d if (d / "global.pt").exists() else None


def load(path: Path) -> dict[str, Any]:
    return cast(dict[str, Any], torch.load(path, map_location="cpu", weights_only=False))
