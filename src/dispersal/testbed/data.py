"""Byte-level corpus: any text files or folders, by default the Python standard library's *.py.

Split: a file goes to validation when the first byte of sha256(relative path) is below 13
(13/256 = 5.1 %), so the split is stable across machines and runs. Batches are a pure function of
(seed, worker index, inner step): no sampler state to checkpoint, and a resumed run reads exactly
the batches the uninterrupted run would have.
"""

from __future__ import annotations

import hashlib
import sysconfig
from pathlib import Path

import numpy as np
import torch

VAL_THRESHOLD = 13  # of 256: ~5 % of files go to validation


def default_sources() -> list[Path]:
    """The standard library's own folder (site-packages excluded when gathering)."""
    return [Path(sysconfig.get_paths()["stdlib"])]


def _gather(sources: list[Path]) -> list[tuple[str, Path]]:
    files: list[tuple[str, Path]] = []
    for src in sources:
        if src.is_file():
            files.append((src.name, src))
            continue
        if not src.is_dir():
            raise FileNotFoundError(2, "no such file or folder", str(src))
        pattern = "*.py" if src == default_sources()[0] else "*"
        for f in sorted(src.rglob(pattern)):
            rel = f.relative_to(src)
            if f.is_file() and "site-packages" not in rel.parts and "__pycache__" not in rel.parts:
                files.append((rel.as_posix(), f))
    return files


def is_validation(relpath: str) -> bool:
    """Stable ~5 % split by hash of the relative path."""
    return hashlib.sha256(relpath.encode()).digest()[0] < VAL_THRESHOLD


def prepare_corpus(sources: list[str] | tuple[str, ...], out_dir: Path) -> tuple[Path, Path]:
    """Concatenate the files into ``train.bin`` and ``val.bin`` (uint8) under ``out_dir``; reused if present."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [Path(s) for s in sources] or default_sources()
    key = hashlib.sha256("\n".join(str(p.resolve()) for p in paths).encode()).hexdigest()[:12]
    train, val = out_dir / f"corpus_{key}_train.bin", out_dir / f"corpus_{key}_val.bin"
    if train.exists() and val.exists():
        return train, val
    parts: dict[bool, list[bytes]] = {False: [], True: []}
    for rel, f in _gather(paths):
        parts[is_validation(rel)].append(f.read_bytes())
    if not parts[True]:  # tiny custom corpora: still hold out something
        parts[True].append(parts[False].pop()) if len(parts[False]) > 1 else None
    for target, chunks in ((train, parts[False]), (val, parts[True])):
        blob = b"\n".join(chunks)
        if len(blob) < 2:
            raise ValueError(f"data: corpus split {target.name} is empty; give more or larger text files")
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(blob)
        tmp.replace(target)
    return train, val


class ByteData:
    """Memory-mapped byte corpus with deterministic batch sampling."""

    def __init__(self, path: Path, block_size: int, batch_size: int) -> None:
        self.data = np.memmap(path, dtype=np.uint8, mode="r")
        self.block_size = min(block_size, len(self.data) - 1)
        self.batch_size = batch_size

    def batch(self, seed: int, worker: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Random windows chosen by a generator seeded from (seed, worker, step)."""
        g = torch.Generator().manual_seed((seed * 1_000_003 + worker) * 1_000_003 + step)
        hi = len(self.data) - self.block_size - 1
        starts = torch.randint(0, max(1, hi), (self.batch_size,), generator=g).tolist()
        x = np.stack([self.data[s : s + self.block_size] for s in starts]).astype(np.int64)
        y = np.stack([self.data[s + 1 : s + 1 + self.block_size] for s in starts]).astype(np.int64)
        return torch.from_numpy(x), torch.from_numpy(y)

    @property
    def tokens(self) -> int:
        return len(self.data)
