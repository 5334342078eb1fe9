"""Atomic, validated checkpoints: global state (weights, outer optimizer, round = data position) + one file
per worker. Never unpickled: ``torch.load(weights_only=True)`` only builds tensors and plain containers.

Layout under ``OUT/ckpt``::

    r000040/global.pt          global weights, outer optimizer, round, tokens, per-worker counters
    r000040/global.pt.sha256   SHA-256 of global.pt's bytes (written with it, checked before loading)
    r000040/w0.pt (+ .sha256)  each worker's local weights, inner AdamW, codec residual, link counters
    LATEST                     "r000040", replaced atomically only after every file above is in place

On resume the round LATEST names is loaded if it is intact (hash matches, torch's safe loader accepts
it, shapes match the model, every value finite); otherwise the newest older intact round is used and
``checkpoint_fallback`` is logged. LATEST naming a round folder that does not exist is an error
(:class:`CheckpointError`), not a silent restart from round 0.

Batches are a pure function of (seed, worker, step), so the round number *is* the data position;
torch's global RNG state is stored anyway for completeness.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed from (the message names the path)."""


def _atomic_write(data: bytes, path: Path, midway: Callable[[], None] | None = None) -> None:
    """Write to a temporary name, fsync, rename over ``path``. ``midway`` (fault injection: a kill
    during the write) is called after half of the bytes are on disk; a process killed there leaves
    only the temporary file, never a partial ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data[: len(data) // 2])
            if midway is not None:
                fh.flush()
                midway()
            fh.write(data[len(data) // 2 :])
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # a failed write (full disk) leaves no temporary file; a SIGKILL still can
        tmp.unlink(missing_ok=True)
        raise


def _atomic_save(obj: Any, path: Path, midway: Callable[[], None] | None = None) -> None:
    """torch.save to bytes, then the hash file, then the checkpoint itself (both atomic)."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    _atomic_write(hashlib.sha256(data).hexdigest().encode() + b"\n", _hash_path(path))
    _atomic_write(data, path, midway)


def _hash_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


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
    _atomic_write(d.name.encode(), out / "ckpt" / "LATEST")


def load(path: Path) -> dict[str, Any]:
    """Load one checkpoint file after checking its SHA-256; tensors and plain containers only.

    Raises CheckpointError naming the path when the hash file is missing or differs, or the file is
    not a plain checkpoint (a pickle that would build any other object is refused, never run)."""
    try:
        data = path.read_bytes()
        want = _hash_path(path).read_text().strip()
    except OSError as exc:
        raise CheckpointError(f"{path}: {exc.strerror or exc}") from None
    if hashlib.sha256(data).hexdigest() != want:
        raise CheckpointError(f"{path}: content hash does not match {_hash_path(path).name} (damaged)")
    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, ValueError, EOFError, AttributeError) as exc:
        raise CheckpointError(f"{path}: not a plain checkpoint ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: not a checkpoint dictionary")
    return obj


def _finite(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and bool(torch.isfinite(t.float()).all())


def check_state(s: dict[str, Any], numel: int, where: str) -> None:
    """Global state (a checkpoint or a state transfer) fits a model of ``numel`` parameters and is finite.

    Raises ValueError naming ``where`` and the field."""
    problems = []
    try:
        if not isinstance(s.get("round"), int) or s["round"] < 0:
            problems.append("round")
        for name, t in (("global", s.get("global")), ("outer.buf", (s.get("outer") or {}).get("buf"))):
            if not isinstance(t, torch.Tensor) or t.shape != (numel,) or t.dtype != torch.float32:
                problems.append(f"{name} (shape)")
            elif not _finite(t):
                problems.append(f"{name} (non-finite)")
        inner = s.get("inner") or {}
        for st in (inner.get("state") or {}).values():
            if not all(_finite(v) for v in st.values() if isinstance(v, torch.Tensor)):
                problems.append("inner (non-finite)")
                break
        if not isinstance(s.get("stats"), dict) or not isinstance(s.get("tokens"), int):
            problems.append("stats/tokens")
    except (AttributeError, TypeError) as exc:
        problems.append(f"malformed ({exc})")
    if problems:
        raise ValueError(f"{where}: invalid {', '.join(problems)}")


def check_worker_state(w: dict[str, Any], numel: int, where: str) -> None:
    m = w.get("model")
    if not isinstance(m, torch.Tensor) or m.shape != (numel,) or not _finite(m):
        raise ValueError(f"{where}: invalid model (shape or non-finite values)")
    if not isinstance(w.get("inner"), dict) or not isinstance(w.get("counters"), dict):
        raise ValueError(f"{where}: invalid inner/counters")


def rounds_available(out: Path) -> list[Path]:
    """Round folders under OUT/ckpt, newest first."""
    ck = out / "ckpt"
    if not ck.is_dir():
        return []
    return sorted((d for d in ck.iterdir() if re.fullmatch(r"r\d{6}", d.name) and d.is_dir()), reverse=True)


def latest(out: Path) -> Path | None:
    """The round folder LATEST names (None without LATEST). CheckpointError if it names a missing one."""
    p = out / "ckpt" / "LATEST"
    if not p.exists():
        return None
    name = p.read_text().strip()
    d = out / "ckpt" / name
    if not re.fullmatch(r"r\d{6}", name) or not d.is_dir():
        raise CheckpointError(f"{p}: names round {name!r}, which does not exist under {out / 'ckpt'}")
    return d


def resolve(
    out: Path, numel: int | None = None, log: Callable[..., None] | None = None
) -> tuple[Path, dict[str, Any]] | None:
    """The newest intact round at or before LATEST's, with its loaded global state; None when there
    is no LATEST. Every damaged round skipped is reported through ``log`` (``checkpoint_fallback``).
    CheckpointError when LATEST names a missing round or no round is intact."""
    named = latest(out)
    if named is None:
        return None
    problems = []
    for d in (d for d in rounds_available(out) if d.name <= named.name):
        try:
            g = load(d / "global.pt")
            if numel is not None:
                check_state(g, numel, str(d / "global.pt"))
        except (CheckpointError, ValueError) as exc:
            problems.append(str(exc))
            if log is not None:
                log(event="checkpoint_fallback", round_dir=d.name, why=str(exc)[:300])
            continue
        return d, g
    raise CheckpointError(f"{out / 'ckpt'}: no intact checkpoint ({'; '.join(problems)[:400]})")


def load_resume(
    out: Path, worker: str, numel: int, log: Callable[..., None] | None = None
) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """(global state, this worker's state or None) of the newest intact round, or None (nothing to
    resume). A damaged worker file is skipped (the worker starts from the global weights)."""
    got = resolve(out, numel, log)
    if got is None:
        return None
    d, g = got
    wfile = d / f"{worker}.pt"
    w = None
    if wfile.exists():
        try:
            w = load(wfile)
            check_worker_state(w, numel, str(wfile))
        except (CheckpointError, ValueError) as exc:
            w = None
            if log is not None:
                log(event="checkpoint_fallback", round_dir=d.name, why=str(exc)[:300])
    return g, w
