"""The data side of the testbed: the local BPE tokenizer, streamed shards, the batch sampler, presets,
and the statistics over seeds (report.mean_interval)."""

from __future__ import annotations

import math
import sysconfig
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from dispersal.model.inputs.errors import InputError  # noqa: E402
from dispersal.testbed.config import BPE_DEFAULT_VOCAB, MODEL_PRESETS, TestbedConfig  # noqa: E402
from dispersal.testbed.data import (  # noqa: E402
    ByteData,
    TokenData,
    open_datasets,
    prepare_corpus,
    prepare_tokens,
    split_files,
)
from dispersal.testbed.gpt import GPT, GPTConfig, param_count  # noqa: E402
from dispersal.testbed.report import mean_interval, t_cdf, t_quantile  # noqa: E402
from dispersal.testbed.supervisor import run_local  # noqa: E402
from dispersal.testbed.tokenizer import BPETokenizer, chunks, count_chunks  # noqa: E402

pytestmark = pytest.mark.torch

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SMALL_SOURCES = (str(STDLIB / "json"),)  # 5 files, ~45 kB: a real corpus that trains in well under a second


@pytest.fixture(scope="module")
def small_tok() -> BPETokenizer:
    train, _ = split_files(SMALL_SOURCES)
    return BPETokenizer.train(count_chunks(f.read_bytes() for f in train), 400)


# ---------------------------------------------------------------------------------------- tokenizer
def test_bpe_training_worked_by_hand() -> None:
    """counts {abab: 3, ab: 2}: (a,b) occurs 3*2 + 2 = 8 times, (b,a) 3 -> merge (a,b) = 256; then
    abab = (256, 256) x 3 -> merge (256, 256) = 257; then no pair is left, so training stops at 258
    tokens although 300 were asked for. ababab -> (256, 256, 256) -> (257, 256)."""
    tok = BPETokenizer.train(Counter({b"abab": 3, b"ab": 2}), 300)
    assert tok.merges == [(97, 98), (256, 256)]
    assert tok.vocab_size == 258
    assert tok.pieces[257] == b"abab"
    assert tok.encode(b"ababab") == [257, 256]
    # Equal counts: the numerically smaller pair wins, so training does not depend on dict order.
    assert BPETokenizer.train(Counter({b"cd": 1, b"ab": 1}), 257).merges == [(97, 98)]
    assert BPETokenizer.train(Counter({b"ab": 1, b"cd": 1}), 257).merges == [(97, 98)]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_chunks_cover_the_input_and_bpe_round_trips(small_tok: BPETokenizer, data: bytes) -> None:
    assert b"".join(chunks(data)) == data
    ids = small_tok.encode(data)
    assert all(0 <= i < small_tok.vocab_size for i in ids)
    assert small_tok.decode(ids) == data


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.binary(min_size=1, max_size=12), st.integers(1, 20), min_size=1, max_size=30),
    st.integers(256, 320),
)
def test_training_forms_equal_fresh_encodings(counts: dict[bytes, int], vocab: int) -> None:
    """The trainer seeds its cache with each training word's final form; a tokenizer rebuilt from the
    merges alone (empty cache) must encode every training word to exactly those ids."""
    tok = BPETokenizer.train(Counter(counts), vocab)
    fresh = BPETokenizer(tok.merges)
    for word in counts:
        assert fresh._encode_chunk(word) == tok._cache[word]
        assert fresh.decode(tok._cache[word]) == word


def test_bpe_compresses_held_out_code_and_reloads_identically(
    small_tok: BPETokenizer, tmp_path: Path
) -> None:
    """Trained on json's training files; on a held-out module of the standard library it still needs
    fewer tokens than bytes. A reloaded tokenizer (empty cache) encodes exactly as the trained one."""
    held_out = (STDLIB / "textwrap.py").read_bytes()
    ids = small_tok.encode(held_out)
    assert len(ids) < 0.75 * len(held_out)
    small_tok.save(tmp_path / "tok.json")
    again = BPETokenizer.load(tmp_path / "tok.json")
    assert again.merges == small_tok.merges and again.encode(held_out) == ids


def test_bpe_bad_input() -> None:
    with pytest.raises(InputError, match="vocab-size"):
        BPETokenizer.train(Counter({b"ab": 1}), 100)
    with pytest.raises(ValueError, match="not yet defined"):
        BPETokenizer([(97, 300)])


# ---------------------------------------------------------------------------------------- corpus on disk
def test_byte_corpus_is_the_files_joined(tmp_path: Path) -> None:
    train_files, val_files = split_files(SMALL_SOURCES)
    train, val = prepare_corpus(SMALL_SOURCES, tmp_path)
    assert train.read_bytes() == b"\n".join(f.read_bytes() for f in train_files)
    assert val.read_bytes() == b"\n".join(f.read_bytes() for f in val_files)


def test_bpe_shards_hold_exactly_the_encoded_corpus(tmp_path: Path) -> None:
    """Shards of at most 5,000 tokens, in order, decode back to the training files joined by newlines;
    the tokenizer never saw the validation file; a second call reuses the folder."""
    folder = prepare_tokens(SMALL_SOURCES, tmp_path, vocab_size=400, shard_tokens=5_000)
    import json

    meta = json.loads((folder / "meta.json").read_text())
    tok = BPETokenizer.load(folder / "tokenizer.json")
    train_files, val_files = split_files(SMALL_SOURCES)
    assert val_files, "json/ has a validation file (hash split)"
    for split, files in (("train", train_files), ("val", val_files)):
        shards = meta[split]["shards"]
        arrays = [np.fromfile(folder / s["file"], dtype=np.uint16) for s in shards]
        assert [len(a) for a in arrays] == [s["tokens"] for s in shards]
        assert all(len(a) == 5_000 for a in arrays[:-1]) and 0 < len(arrays[-1]) <= 5_000
        joined = b"\n".join(f.read_bytes() for f in files)
        assert tok.decode(np.concatenate(arrays).tolist()) == joined
        assert meta[split]["bytes"] == len(joined)
    assert len(meta["train"]["shards"]) >= 3
    # Trained on the training split only: the same counts give the same merges.
    expected = BPETokenizer.train(count_chunks(f.read_bytes() for f in train_files), 400)
    assert tok.merges == expected.merges
    stamp = (folder / "meta.json").stat().st_mtime_ns
    assert prepare_tokens(SMALL_SOURCES, tmp_path, vocab_size=400, shard_tokens=5_000) == folder
    assert (folder / "meta.json").stat().st_mtime_ns == stamp
    (folder / "meta.json").unlink()  # as if interrupted before the end: rebuilt in place
    assert prepare_tokens(SMALL_SOURCES, tmp_path, vocab_size=400, shard_tokens=5_000) == folder
    assert json.loads((folder / "meta.json").read_text()) == meta


def _prepare_in_child(out: str) -> str:
    return str(prepare_tokens(SMALL_SOURCES, Path(out), vocab_size=300, shard_tokens=5_000))


def test_two_processes_preparing_one_folder_prepare_it_once(tmp_path: Path) -> None:
    """Two processes race for the same folder: the file lock makes one train and write, the other reuse."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(2) as pool:
        folders = pool.map(_prepare_in_child, [str(tmp_path)] * 2, chunksize=1)
    assert folders[0] == folders[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".prepare.lock", Path(folders[0]).name]
    assert (Path(folders[0]) / "meta.json").exists()


def _write(path: Path, values: np.ndarray) -> Path:
    values.astype(np.uint16).tofile(path)
    return path


def test_windows_never_cross_shards_and_are_a_pure_function_of_seed_worker_step(tmp_path: Path) -> None:
    # Shard k holds 10000 k + 0, 1, 2, ...: a window is contiguous in one shard iff its values step by 1.
    paths = [_write(tmp_path / f"s{k}.bin", 10_000 * k + np.arange(n)) for k, n in enumerate([50, 9, 200])]
    data = TokenData(paths, np.uint16, block_size=16, batch_size=64)
    assert len(data.shards) == 2  # the 9-token shard is too short for a 16 + 1 window
    seen = set()
    for step in range(20):
        x, y = data.batch(seed=3, worker=1, step=step)
        assert x.shape == y.shape == (64, 16) and x.dtype == torch.int64
        assert torch.equal(y[:, :-1], x[:, 1:]) and torch.equal(y[:, -1], x[:, -1] + 1)
        assert torch.all(x[:, 1:] - x[:, :-1] == 1)
        seen |= set((x[:, 0] // 10_000).tolist())
        x2, _ = data.batch(seed=3, worker=1, step=step)
        assert torch.equal(x, x2)
    assert seen == {0, 2}
    assert not torch.equal(data.batch(3, 1, 0)[0], data.batch(3, 2, 0)[0])


def test_one_shard_draws_exactly_as_the_earlier_byte_loader(tmp_path: Path) -> None:
    """Earlier versions drew starts = randint(0, max(1, len - block - 1)) from the same generator."""
    raw = np.random.default_rng(0).integers(0, 256, 5_000).astype(np.uint8)
    raw.tofile(tmp_path / "c.bin")
    data = ByteData(tmp_path / "c.bin", block_size=32, batch_size=8)
    g = torch.Generator().manual_seed((7 * 1_000_003 + 2) * 1_000_003 + 11)
    starts = torch.randint(0, 5_000 - 32 - 1, (8,), generator=g).tolist()
    x, _ = data.batch(7, 2, 11)
    assert x.tolist() == [raw[s : s + 32].tolist() for s in starts]


# ---------------------------------------------------------------------------------------- config, presets
def test_tokenizer_config_and_preset_sizes() -> None:
    assert TestbedConfig().vocab_size == 256
    assert TestbedConfig(tokenizer="bpe").vocab_size == BPE_DEFAULT_VOCAB
    cfg = TestbedConfig.from_dict(TestbedConfig(tokenizer="bpe", vocab_size=1000).to_dict())
    assert cfg.gpt_kwargs()["vocab_size"] == 1000
    with pytest.raises(InputError, match="vocab-size"):
        TestbedConfig(vocab_size=512)
    with pytest.raises(InputError, match="vocab-size"):
        TestbedConfig(tokenizer="bpe", vocab_size=70_000)
    with pytest.raises(InputError, match="tokenizer"):
        TestbedConfig(tokenizer="sentencepiece")
    # The closed-form count equals the built model (tied head) for the small presets and both tokenizers.
    for model in ("tiny", "small"):
        for tokenizer, vocab in (("byte", 256), ("bpe", 1000)):
            c = TestbedConfig(model=model, tokenizer=tokenizer, vocab_size=vocab)
            assert GPT(GPTConfig(**c.gpt_kwargs())).num_params() == param_count(
                c.n_layer, c.n_embd, c.block_size, c.vocab_size
            )
    sizes = {
        m: param_count(p["n_layer"], p["n_embd"], p["block_size"], BPE_DEFAULT_VOCAB)
        for m, p in MODEL_PRESETS.items()
    }
    assert sizes["tiny"] < sizes["small"] < sizes["medium"] < sizes["base"] <= 100_000_000
    assert sizes["base"] == 88_988_160
    # GPT-2 small's published size with its own vocabulary (50,257) and context (1,024): 124 M.
    assert round(param_count(12, 768, 1024, 50_257) / 1e6) == 124


# ---------------------------------------------------------------------------------------- statistics
def test_t_quantile_matches_closed_forms() -> None:
    """df 1 (Cauchy): tan(pi (p - 1/2)); df 2: u sqrt(2 / (1 - u^2)), u = 2p - 1."""
    for p in (0.6, 0.9, 0.975, 0.995):
        assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)
        u = 2 * p - 1
        assert t_quantile(p, 2) == pytest.approx(u * math.sqrt(2 / (1 - u * u)), rel=1e-9)
    assert t_cdf(0.0, 5) == 0.5 and t_quantile(0.025, 3) == pytest.approx(-t_quantile(0.975, 3))
    assert t_quantile(0.975, 4) == pytest.approx(2.776445, abs=1e-6)  # Student-t tables


def test_mean_interval_by_hand() -> None:
    """[1.0, 1.1, 1.2]: mean 1.1, sd 0.1, half = t(0.975, 2) 0.1 / sqrt 3 = 4.302653 * 0.057735 = 0.248414."""
    iv = mean_interval([1.0, 1.1, 1.2])
    assert iv.mean == pytest.approx(1.1) and iv.sd == pytest.approx(0.1)
    assert iv.half_width == pytest.approx(0.248414, abs=1e-6) and iv.n == 3
    with pytest.raises(InputError, match="seeds"):
        mean_interval([1.0])


@pytest.mark.slow
# 20 examples: each costs three intervals, ~0.15 s apiece here (t_quantile inverts the t CDF
# numerically); the invariants are checked on every example, and the by-hand and closed-form cases
# above pin the values.
@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(0.5, 2.0), min_size=2, max_size=8), st.floats(0.5, 0.99))
def test_mean_interval_invariants(values: list[float], confidence: float) -> None:
    iv = mean_interval(values, confidence)
    assert iv.low <= iv.mean <= iv.high
    wider = mean_interval(values, min(0.999, confidence + 0.005))
    assert wider.half_width >= iv.half_width - 1e-12
    shifted = mean_interval([v + 1 for v in values], confidence)
    assert shifted.half_width == pytest.approx(iv.half_width, rel=1e-6, abs=1e-9)


# ---------------------------------------------------------------------------------------- real processes
@pytest.mark.slow
def test_bpe_run_end_to_end(tmp_path: Path) -> None:
    """Two worker processes train on BPE tokens; the supervisor prepared the shards once."""
    cfg = TestbedConfig(
        algorithm="diloco",
        workers=2,
        steps=20,
        inner_steps=10,
        tokenizer="bpe",
        vocab_size=400,
        data=SMALL_SOURCES,
        eval_batches=2,
    )
    summary = run_local(cfg, tmp_path / "run")
    assert summary["completed"], summary
    assert summary["params"] == param_count(cfg.n_layer, cfg.n_embd, cfg.block_size, 400)
    assert math.isfinite(summary["final_val_loss"]) and summary["final_val_loss"] < math.log(400)
    assert len(list((tmp_path / "run" / "data").glob("tok_*/meta.json"))) == 1
    train, val = open_datasets(cfg, tmp_path / "run" / "data")
    assert val.tokens < train.tokens and max(int(s.max()) for s in train.shards) < 400
