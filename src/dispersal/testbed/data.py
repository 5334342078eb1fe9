"""Corpus on disk, streamed: bytes (vocab 256) or tokens of a locally trained BPE (uint16 shards).

Sources are any text files or folders; by default the Python standard library's own ``*.py``
files (about 30 MB, always present, no downloads).

Split: a file goes to validation when the first byte of sha256(relative path) is below 13
(13/256 = 5.1 %), so the split is stable across machines and runs. Files are read and written one
at a time, so memory does not grow with the corpus (only the BPE trainer's table of distinct
chunks does, and it reads at most ``BPE_TRAIN_MAX_BYTES``).

* ``byte``: ``corpus_<key>_{train,val}.bin``, uint8, the files joined by ``\\n``.
* ``bpe``: ``tok_<key>/`` holds ``tokenizer.json`` (trained on the training split only),
  ``{train,val}_NNN.bin`` uint16 shards of at most ``SHARD_TOKENS`` tokens and ``meta.json``
  (written last: its presence means the folder is complete).

Preparation takes a file lock in the output folder, so workers that share it prepare once.
Batches are a pure function of (seed, worker index, inner step): no sampler state to checkpoint,
and a resumed run reads exactly the batches the uninterrupted run would have. The shards are
memory-mapped (``np.memmap``) and only the sampled windows are read.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dispersal.model.inputs.errors import require

if TYPE_CHECKING:
    from dispersal.testbed.config import TestbedConfig

VAL_THRESHOLD = 13  # of 256: ~5 % of files go to validation
TOKENIZERS = ("byte", "bpe")
SHARD_TOKENS = 1 << 22
"""Tokens per shard file (4,194,304 = 8 MiB of uint16): the standard library makes 3 training shards."""
BPE_TRAIN_MAX_BYTES = 64 << 20
"""The BPE tokenizer learns from at most the first 64 MiB of training files (sorted by path)."""
SEPARATOR = b"\n"
"""Written between two files."""


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


def split_files(sources: list[str] | tuple[str, ...]) -> tuple[list[Path], list[Path]]:
    """(training files, validation files). A corpus with no validation file gives its last file to it."""
    paths = [Path(s) for s in sources] or default_sources()
    parts: dict[bool, list[Path]] = {False: [], True: []}
    for rel, f in _gather(paths):
        parts[is_validation(rel)].append(f)
    if not parts[True] and len(parts[False]) > 1:  # tiny custom corpora: still hold out something
        parts[True].append(parts[False].pop())
    return parts[False], parts[True]


def _key(sources: list[str] | tuple[str, ...], *extra: object) -> str:
    paths = [Path(s) for s in sources] or default_sources()
    text = "\n".join([str(p.resolve()) for p in paths] + [repr(e) for e in extra])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@contextlib.contextmanager
def _locked(out_dir: Path) -> Iterator[None]:
    """Exclusive lock on ``out_dir/.prepare.lock`` (workers sharing a folder prepare it once)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".prepare.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _empty_split(name: str) -> ValueError:
    return ValueError(f"data: corpus split {name} is empty; give more or larger text files")


def prepare_corpus(sources: list[str] | tuple[str, ...], out_dir: Path) -> tuple[Path, Path]:
    """Byte corpus: ``train.bin`` and ``val.bin`` (uint8) under ``out_dir``, streamed file by file; reused."""
    key = _key(sources)
    train, val = out_dir / f"corpus_{key}_train.bin", out_dir / f"corpus_{key}_val.bin"
    with _locked(out_dir):
        if train.exists() and val.exists():
            return train, val
        for target, files in zip((train, val), split_files(sources), strict=True):
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            written = 0
            with open(tmp, "wb") as fh:
                for i, f in enumerate(files):
                    if i:
                        written += fh.write(SEPARATOR)
                    written += fh.write(f.read_bytes())
            if written < 2:
                tmp.unlink()
                raise _empty_split(target.name)
            tmp.replace(target)
    return train, val


class _ShardWriter:
    """Appends token ids to ``<prefix>_NNN.bin`` files of at most ``shard_tokens`` tokens each."""

    def __init__(self, folder: Path, prefix: str, shard_tokens: int) -> None:
        self.folder, self.prefix, self.shard_tokens = folder, prefix, shard_tokens
        self.shards: list[dict[str, Any]] = []
        self._fh: Any = None
        self._in_shard = 0

    def write(self, ids: np.ndarray) -> None:
        while ids.size:
            if self._fh is None:
                name = f"{self.prefix}_{len(self.shards):03d}.bin"
                self._fh = open(self.folder / name, "wb")  # noqa: SIM115 (kept open across writes)
                self.shards.append({"file": name, "tokens": 0})
                self._in_shard = 0
            take = min(ids.size, self.shard_tokens - self._in_shard)
            self._fh.write(ids[:take].tobytes())
            self._in_shard += take
            self.shards[-1]["tokens"] += take
            ids = ids[take:]
            if self._in_shard == self.shard_tokens:
                self.close()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def prepare_tokens(
    sources: list[str] | tuple[str, ...],
    out_dir: Path,
    vocab_size: int,
    shard_tokens: int = SHARD_TOKENS,
    train_max_bytes: int = BPE_TRAIN_MAX_BYTES,
) -> Path:
    """BPE corpus: train the tokenizer on the training split, write uint16 shards. Returns the folder."""
    from dispersal.testbed.tokenizer import BPETokenizer, count_chunks

    require(shard_tokens >= 2, "shard-tokens", f"an integer >= 2, got {shard_tokens}")
    folder = out_dir / f"tok_{_key(sources, 'bpe', vocab_size, shard_tokens, train_max_bytes)}"
    with _locked(out_dir):
        if (folder / "meta.json").exists():
            return folder
        train_files, val_files = split_files(sources)

        def sample() -> Iterator[bytes]:
            left = train_max_bytes
            for f in train_files:
                if left <= 0:
                    return
                blob = f.read_bytes()[:left]
                left -= len(blob)
                yield blob

        tok = BPETokenizer.train(count_chunks(sample()), vocab_size)
        tmp = out_dir / f".{folder.name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        tok.save(tmp / "tokenizer.json")
        sep = np.asarray(tok.encode(SEPARATOR), dtype=np.uint16)
        meta: dict[str, Any] = {
            "tokenizer": "bpe",
            "vocab_size": tok.vocab_size,
            "dtype": "uint16",
            "shard_tokens": shard_tokens,
            "train_max_bytes": train_max_bytes,
            "sources": [str(Path(s).resolve()) for s in sources] or ["<stdlib>"],
        }
        for split, files in (("train", train_files), ("val", val_files)):
            w = _ShardWriter(tmp, split, shard_tokens)
            nbytes = 0
            for i, f in enumerate(files):
                blob = f.read_bytes()
                if i:
                    w.write(sep)
                    nbytes += len(SEPARATOR)
                w.write(np.asarray(tok.encode(blob), dtype=np.uint16))
                nbytes += len(blob)
            w.close()
            tokens = sum(s["tokens"] for s in w.shards)
            if tokens < 2:
                shutil.rmtree(tmp, ignore_errors=True)
                raise _empty_split(split)
            meta[split] = {"shards": w.shards, "tokens": tokens, "bytes": nbytes}
        from dispersal._io import atomic_write_text

        atomic_write_text(tmp / "meta.json", json.dumps(meta, indent=2) + "\n")
        shutil.rmtree(folder, ignore_errors=True)  # an incomplete folder (no meta.json) is replaced
        tmp.replace(folder)
    return folder


def resolved_vocab_size(tokenizer: str, vocab_size: int) -> int:
    """``vocab_size`` 0 means the tokenizer's default: 256 (byte) or ``config.BPE_DEFAULT_VOCAB``."""
    from dispersal.testbed.config import BPE_DEFAULT_VOCAB

    if tokenizer == "byte":
        return 256
    return vocab_size or BPE_DEFAULT_VOCAB


def prepare_data(cfg: TestbedConfig, out_dir: Path) -> dict[str, Any]:
    """Prepare ``cfg``'s corpus under ``out_dir`` (idempotent). Returns a description of the splits."""
    if cfg.tokenizer == "byte":
        train, val = prepare_corpus(cfg.data, out_dir)
        return {
            "tokenizer": "byte",
            "vocab_size": 256,
            "dtype": "uint8",
            "train": {"paths": [train], "tokens": train.stat().st_size, "bytes": train.stat().st_size},
            "val": {"paths": [val], "tokens": val.stat().st_size, "bytes": val.stat().st_size},
        }
    folder = prepare_tokens(cfg.data, out_dir, cfg.vocab_size)
    meta: dict[str, Any] = json.loads((folder / "meta.json").read_text())
    for split in ("train", "val"):
        meta[split]["paths"] = [folder / s["file"] for s in meta[split]["shards"]]
    return meta


def open_datasets(
    cfg: TestbedConfig, out_dir: Path, device: torch.device | str | None = None
) -> tuple[TokenData, TokenData]:
    """(train, val) datasets for ``cfg``, preparing the corpus first if needed."""
    meta = prepare_data(cfg, out_dir)
    dtype = np.dtype(meta["dtype"])
    return tuple(  # type: ignore[return-value]
        TokenData(meta[s]["paths"], dtype, cfg.block_size, cfg.batch_size, device=device)
        for s in ("train", "val")
    )


class TokenData:
    """Memory-mapped token shards with deterministic batch sampling.

    A window never crosses a shard boundary. With one shard the draw is exactly the byte loader's
    of earlier versions: ``randint(0, max(1, len - block - 1))``.
    """

    def __init__(
        self,
        paths: list[Path],
        dtype: np.dtype | type,
        block_size: int,
        batch_size: int,
        device: torch.device | str | None = None,
    ) -> None:
        maps = [np.memmap(p, dtype=dtype, mode="r") for p in paths]
        longest = max((len(m) for m in maps), default=0)
        if longest < 2:
            raise ValueError("data: every shard is shorter than 2 tokens")
        self.block_size = min(block_size, longest - 1)
        self.shards = [m for m in maps if len(m) >= self.block_size + 1]
        counts = np.array([max(1, len(m) - self.block_size - 1) for m in self.shards], dtype=np.int64)
        self._ends = np.cumsum(counts)
        self.batch_size = batch_size
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self._pin = self.device.type == "cuda"

    def batch(self, seed: int, worker: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Random windows chosen by a generator seeded from (seed, worker, step)."""
        g = torch.Generator().manual_seed((seed * 1_000_003 + worker) * 1_000_003 + step)
        draws = torch.randint(0, int(self._ends[-1]), (self.batch_size,), generator=g).numpy()
        which = np.searchsorted(self._ends, draws, side="right")
        starts = draws - np.concatenate([[0], self._ends[:-1]])[which]
        b = self.block_size
        x = np.stack([self.shards[k][s : s + b] for k, s in zip(which, starts, strict=True)])
        y = np.stack([self.shards[k][s + 1 : s + 1 + b] for k, s in zip(which, starts, strict=True)])
        xt, yt = torch.from_numpy(x.astype(np.int64)), torch.from_numpy(y.astype(np.int64))
        if self.device.type == "cpu":
            return xt, yt
        if self._pin:
            xt, yt = xt.pin_memory(), yt.pin_memory()
        return xt.to(self.device, non_blocking=True), yt.to(self.device, non_blocking=True)

    @property
    def tokens(self) -> int:
        return sum(len(m) for m in self.shards)


class ByteData(TokenData):
    """One uint8 file (the byte corpus)."""

    def __init__(self, path: Path, block_size: int, batch_size: int) -> None:
        super().__init__([path], np.uint8, block_size, batch_size)
