"""A small byte-level BPE tokenizer, trained here on the testbed's own corpus (no downloads).

Byte-pair encoding as in Sennrich et al. 2016 (arXiv 1508.07909, sec. 3.1), on bytes rather than
characters as in GPT-2 (Radford et al. 2019, sec. 2.2): the base vocabulary is the 256 byte
values, so every input is encodable and ``decode(encode(b)) == b`` for any bytes ``b``.

Text is first cut into *chunks* (a run of letters, a run of digits, a run of other symbols, each
with at most one leading space; or a run of whitespace), and merges never cross a chunk boundary,
the same idea as GPT-2's pre-tokenizer, written here for ASCII bytes (``CHUNK_PATTERN``). Training
counts distinct chunks, then repeatedly merges the most frequent adjacent pair of tokens (ties go
to the numerically smallest pair, so training is deterministic) until ``vocab_size`` tokens exist.
Token ``256 + k`` is merge ``k``. Encoding applies merges in the order they were learned.

Pure Python (``re``, ``collections``, ``heapq``): about a minute for 3,840 merges over the
standard library's ~30 MB here; the result is saved as JSON and reused.
"""

from __future__ import annotations

import heapq
import itertools
import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from dispersal.model.inputs.errors import require

BYTE_VOCAB = 256
"""Base vocabulary: one token per byte value."""
MAX_VOCAB = 65_536
"""Upper bound so token ids fit the uint16 shards written by :mod:`dispersal.testbed.data`."""
CHUNK_PATTERN = rb" ?[A-Za-z_]+| ?[0-9]+| ?[^\sA-Za-z_0-9]+|\s+(?!\S)|\s+"
"""Pre-tokenizer: every byte falls in exactly one alternative, so chunks concatenate to the input."""
FORMAT_VERSION = 1

_CHUNK_RE = re.compile(CHUNK_PATTERN)


def chunks(data: bytes) -> list[bytes]:
    """Cut ``data`` into the chunks merges stay inside; ``b"".join(chunks(d)) == d``."""
    return _CHUNK_RE.findall(data)


def count_chunks(blobs: Iterable[bytes]) -> Counter[bytes]:
    """Distinct chunks and their frequencies over several texts (the only thing training needs)."""
    counts: Counter[bytes] = Counter()
    for blob in blobs:
        counts.update(_CHUNK_RE.findall(blob))
    return counts


def _merge_word(word: tuple[int, ...], pair: tuple[int, int], new: int) -> tuple[int, ...]:
    """Replace every non-overlapping occurrence of ``pair`` in ``word``, left to right."""
    a, b = pair
    out: list[int] = []
    i, n = 0, len(word)
    while i < n:
        if i + 1 < n and word[i] == a and word[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def _pairs(word: tuple[int, ...]) -> Counter[tuple[int, int]]:
    return Counter(itertools.pairwise(word))


class BPETokenizer:
    """Byte-level BPE: ``merges[k] = (a, b)`` makes token ``256 + k`` from tokens ``a`` then ``b``."""

    def __init__(self, merges: list[tuple[int, int]]) -> None:
        require(
            len(merges) + BYTE_VOCAB <= MAX_VOCAB,
            "vocab-size",
            f"at most {MAX_VOCAB} tokens, got {len(merges) + BYTE_VOCAB}",
        )
        for k, (a, b) in enumerate(merges):
            if not (0 <= a < BYTE_VOCAB + k and 0 <= b < BYTE_VOCAB + k):
                raise ValueError(f"tokenizer: merge {k} refers to a token not yet defined: {(a, b)}")
        self.merges = [(int(a), int(b)) for a, b in merges]
        self.ranks = {pair: k for k, pair in enumerate(self.merges)}
        self.pieces: list[bytes] = [bytes([i]) for i in range(BYTE_VOCAB)]
        for a, b in self.merges:
            self.pieces.append(self.pieces[a] + self.pieces[b])
        self._cache: dict[bytes, tuple[int, ...]] = {}

    @property
    def vocab_size(self) -> int:
        return BYTE_VOCAB + len(self.merges)

    # ------------------------------------------------------------------ training
    @classmethod
    def train(cls, counts: Counter[bytes], vocab_size: int) -> BPETokenizer:
        """Learn ``vocab_size - 256`` merges from chunk frequencies (fewer if no pair is left)."""
        require(
            BYTE_VOCAB <= vocab_size <= MAX_VOCAB,
            "vocab-size",
            f"an integer in {BYTE_VOCAB}..{MAX_VOCAB}, got {vocab_size}",
        )
        words = [tuple(w) for w in counts]
        freqs = [counts[w] for w in counts]
        pair_count: Counter[tuple[int, int]] = Counter()
        where: dict[tuple[int, int], set[int]] = {}
        for i, w in enumerate(words):
            for p, c in _pairs(w).items():
                pair_count[p] += c * freqs[i]
                where.setdefault(p, set()).add(i)
        # Max-heap by count, smallest pair first among equals; stale entries are skipped on pop.
        heap = [(-c, p) for p, c in pair_count.items()]
        heapq.heapify(heap)
        merges: list[tuple[int, int]] = []
        while len(merges) < vocab_size - BYTE_VOCAB and heap:
            neg, pair = heapq.heappop(heap)
            if pair_count.get(pair, 0) != -neg or -neg <= 0:
                continue
            new = BYTE_VOCAB + len(merges)
            merges.append(pair)
            touched: set[tuple[int, int]] = set()
            for i in where.pop(pair, set()):
                old = words[i]
                merged = _merge_word(old, pair, new)
                f = freqs[i]
                for p, c in _pairs(old).items():
                    pair_count[p] -= c * f
                    touched.add(p)
                for p, c in _pairs(merged).items():
                    pair_count[p] += c * f
                    where.setdefault(p, set()).add(i)
                    touched.add(p)
                words[i] = merged
            for p in touched:
                c = pair_count.get(p, 0)
                if c > 0:
                    heapq.heappush(heap, (-c, p))
                else:
                    pair_count.pop(p, None)
            pair_count.pop(pair, None)
        tok = cls(merges)
        # The training words' final forms are their encodings: seed the cache with them.
        for chunk, final in zip(counts, words, strict=True):
            tok._cache[chunk] = final
        return tok

    # ------------------------------------------------------------------ encode / decode
    def _encode_chunk(self, chunk: bytes) -> tuple[int, ...]:
        hit = self._cache.get(chunk)
        if hit is not None:
            return hit
        word = tuple(chunk)
        ranks = self.ranks
        while len(word) > 1:
            best = min(itertools.pairwise(word), key=lambda p: ranks.get(p, MAX_VOCAB))
            k = ranks.get(best)
            if k is None:
                break
            word = _merge_word(word, best, BYTE_VOCAB + k)
        self._cache[chunk] = word
        return word

    def encode(self, data: bytes) -> list[int]:
        out: list[int] = []
        for c in _CHUNK_RE.findall(data):
            out.extend(self._encode_chunk(c))
        return out

    def decode(self, ids: Iterable[int]) -> bytes:
        pieces = self.pieces
        return b"".join(pieces[int(i)] for i in ids)

    # ------------------------------------------------------------------ files
    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT_VERSION,
                "kind": "byte-bpe",
                "pattern": CHUNK_PATTERN.decode(),
                "vocab_size": self.vocab_size,
                "merges": self.merges,
            }
        )

    def save(self, path: Path) -> None:
        from dispersal._io import atomic_write_text

        atomic_write_text(path, self.to_json() + "\n")

    @classmethod
    def load(cls, path: Path) -> BPETokenizer:
        d = json.loads(Path(path).read_text())
        if d.get("format") != FORMAT_VERSION or d.get("pattern") != CHUNK_PATTERN.decode():
            raise ValueError(f"tokenizer: {path} was written by another tokenizer version")
        tok = cls([tuple(m) for m in d["merges"]])
        if tok.vocab_size != d["vocab_size"]:
            raise ValueError(f"tokenizer: {path} is inconsistent (vocab_size)")
        return tok
