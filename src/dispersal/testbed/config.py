"""One frozen, keyword-only configuration for a testbed run, validated field by field.

Units are in the names (``_s`` seconds, ``_bits_per_s``). Human strings ("100Mbps/100ms") are
parsed only by :mod:`dispersal.model.inputs.units`, in :func:`parse_link`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from dispersal.model.inputs.errors import InputError, require
from dispersal.model.inputs.units import parse_duration, parse_up_down

ALGORITHMS = ("ddp", "diloco", "streaming", "decoupled")
MERGES = ("mean", "norm_preserving")
"""Decoupled DiLoCo: how the syncer merges the pseudo-gradients it has (robust.py's rules of those names)."""
CODECS = ("none", "bf16", "int8", "int4", "topk")
LINK_MODES = ("virtual", "real")
TOKENIZERS = ("byte", "bpe")
DEVICES = ("cpu", "cuda")
PRECISIONS = ("fp32", "bf16")
COMM_BACKENDS = ("gloo", "nccl")
TRUST = ("trusted", "untrusted")
"""trusted: one operator's own workers; untrusted: peers that may lie (several machines, independent
providers). Both default to the robust rule from 3 workers on (config.default_aggregator)."""
BPE_DEFAULT_VOCAB = 4096
"""Tokens of the locally trained BPE when --vocab-size is not given (256 bytes + 3,840 merges): small
enough that the embedding stays a minor part of the ``tiny`` and ``small`` models' parameters."""

# nanoGPT-shaped presets: (n_layer, n_head, n_embd, block_size, batch_size per worker). ``base`` is
# GPT-2 small's shape (Radford et al. 2019, Table 2: 12 layers, d_model 768, context 1024); with the
# 4,096-token BPE it has 89.0 M parameters (124 M with GPT-2's 50,257-token vocabulary).
# Parameter counts: gpt.param_count (exact), listed in docs/testbed.md.
MODEL_PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64, "batch_size": 8},
    "small": {"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 128, "batch_size": 8},
    "medium": {"n_layer": 6, "n_head": 6, "n_embd": 384, "block_size": 256, "batch_size": 16},
    "base": {"n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024, "batch_size": 8},
}


def aggregator_names() -> list[str]:
    """The aggregation rules a run may name: "mean" and robust.py's table (when it is installed)."""
    try:
        from dispersal.testbed.robust import AGGREGATORS
    except ImportError:
        return ["mean"]
    return sorted({"mean", *AGGREGATORS})


def default_aggregator(trust: str, workers: int = 0) -> str:
    """robust.UNTRUSTED_DEFAULT (trimmed_mean) for an untrusted run and for any run of at least
    robust.ROBUST_MIN_WORKERS (3) workers; robust.TRUSTED_DEFAULT (mean) for a trusted run of fewer
    (``workers`` 0: not known, the trusted default)."""
    try:
        from dispersal.testbed import robust
    except ImportError:
        return "mean"
    robust_here = trust != "trusted" or workers >= robust.ROBUST_MIN_WORKERS
    return str(robust.UNTRUSTED_DEFAULT if robust_here else robust.TRUSTED_DEFAULT)


def check_attack(text: str) -> str:
    """Validate one attack spec (attacks.parse_attack); returns its worker id. InputError("attack")."""
    try:
        from dispersal.testbed.attacks import parse_attack
    except ImportError:
        raise InputError("attack", "attack injection needs dispersal.testbed.attacks") from None
    try:
        return str(parse_attack(text).worker)
    except ValueError as exc:
        msg = str(exc)
        raise InputError(
            "attack", msg.split(":", 1)[1].strip() if msg.startswith("attack") else msg
        ) from None


def parse_link(text: str) -> tuple[float, float, float, float]:
    """Parse ``RATE[/RATE]/LATENCY[/JITTER]`` or ``instant`` to (up, down bit/s, latency s, jitter s).

    Examples: ``100Mbps/100ms`` (symmetric), ``57Mbps/310Mbps/40ms``, ``1Gbps/20ms/5ms``.
    ``instant`` is an infinitely fast link (0 latency). The rate part goes to ``parse_up_down``.
    """
    text = str(text).strip()
    if text.lower() == "instant":
        return math.inf, math.inf, 0.0, 0.0
    parts = [p.strip() for p in text.split("/")]
    # Rejoin "bit/s" style rates split by the slash.
    merged: list[str] = []
    for p in parts:
        if merged and p == "s":
            merged[-1] += "/s"
        else:
            merged.append(p)
    rates: list[str] = []
    times: list[str] = []
    for p in merged:
        (times if p and p[-1:] == "s" and not p.endswith(("bps", "Bps", "/s")) else rates).append(p)
    if not rates or len(rates) > 2 or not times or len(times) > 2:
        raise InputError(
            "link", f"expected RATE[/RATE]/LATENCY[/JITTER] or 'instant', e.g. 100Mbps/100ms, got {text!r}"
        )
    up, down = parse_up_down("/".join(rates), "link")
    latency = parse_duration(times[0], "link")
    jitter = parse_duration(times[1], "link") if len(times) == 2 else 0.0
    require(up > 0 and down > 0, "link", f"rates must be > 0, got {text!r}")
    require(latency >= 0 and jitter >= 0, "link", f"latency and jitter must be >= 0, got {text!r}")
    return up, down, latency, jitter


def parse_loss(text: str | float) -> tuple[float, float]:
    """Parse ``P`` or ``UP_P/DOWN_P`` (segment loss probabilities, real-link mode), e.g. ``0.001/0.01``."""
    parts = [p.strip() for p in str(text).split("/")]
    try:
        values = [float(p.rstrip("%")) / (100.0 if p.endswith("%") else 1.0) for p in parts]
    except ValueError:
        raise InputError(
            "loss", f"expected P or UP_P/DOWN_P in [0, 0.5], e.g. 0.001 or 0.1%, got {text!r}"
        ) from None
    require(len(values) in (1, 2), "loss", f"expected P or UP_P/DOWN_P, got {text!r}")
    up, down = values[0], values[-1]
    require(0 <= up <= 0.5 and 0 <= down <= 0.5, "loss", f"probabilities in [0, 0.5], got {text!r}")
    return up, down


@dataclass(frozen=True, kw_only=True)
class TestbedConfig:
    """Everything that determines a run. ``steps`` counts inner steps per worker."""

    __test__ = False  # not a pytest class, despite the name

    algorithm: str = "diloco"
    """ddp (all-reduce every step), diloco (H local steps, outer Nesterov), streaming, or decoupled
    (asynchronous learners and a syncer: learner.py, syncer.py, decoupled_wire.py)."""
    workers: int = 4
    steps: int = 200
    """Inner optimizer steps per worker (equal total tokens across algorithms)."""
    inner_steps: int = 50
    """H: inner steps between syncs (DiLoCo); ignored by ddp."""
    model: str = "tiny"
    n_layer: int = 0
    n_head: int = 0
    n_embd: int = 0
    block_size: int = 0
    batch_size: int = 0
    """Sequences per worker per inner step; 0 = from the preset."""
    inner_lr: float = 1e-3
    warmup_steps: int = 20
    weight_decay: float = 0.1
    outer_lr: float = 0.7
    """DiLoCo outer SGD learning rate (Douillard et al. 2023, arXiv 2311.08105, sec. 3)."""
    outer_momentum: float = 0.9
    fragments: int = 2
    """Streaming DiLoCo: P fragments synced on a staggered schedule (arXiv 2501.18512)."""
    overlap_steps: int = 1
    """Streaming DiLoCo: tau, inner steps the communication overlaps before the merge."""
    mixing_alpha: float = 0.5
    """Streaming DiLoCo: merged = alpha * local + (1 - alpha) * global; decoupled: the same mix when a
    learner picks up a newer global state at the end of a round (learner.mix)."""
    merge: str = "mean"
    """Decoupled: the syncer's merge rule, mean or norm_preserving (MERGES)."""
    quorum: int = 0
    """Decoupled: distinct learners whose updates the syncer waits for before merging; 0 = a majority,
    floor(workers / 2) + 1 (assumption: the paper's "minimum quorum", arXiv 2604.21428, has no value
    for three learners)."""
    sync_deadline_s: float = 2.0
    """Decoupled: the grace window; an update older than this is merged without a quorum (assumption:
    a few rounds of the tiny preset on this machine, so a lone survivor still moves the global model)."""
    max_staleness: int = 4
    """Decoupled: an update built on a global version more than this many versions old is dropped
    (assumption: bounded staleness, as in asynchronous Local-SGD, Liu et al. 2024, arXiv 2401.09135)."""
    codec: str = "none"
    topk_fraction: float = 0.01
    block: int = 64
    """Quantizer block size (one fp32 scale per block) for int8/int4."""
    link_up_bits_per_s: float = math.inf
    link_down_bits_per_s: float = math.inf
    link_latency_s: float = 0.0
    link_jitter_s: float = 0.0
    link_mode: str = "virtual"
    """virtual: link time from the formula on a virtual clock (fast, deterministic; link.py); real: a
    relay on real sockets shapes every byte and each sync's wall-clock time is charged (netlink.py)."""
    link_loss_up: float = 0.0
    """Real-link mode: probability that a TCP segment on the uplink is lost once (costs one round trip)."""
    link_loss_down: float = 0.0
    relay_down_bits_per_s: float = math.inf
    """Real-link mode: the relay's own downlink, shared by all downloads (inf = not a bottleneck)."""
    realtime: bool = False
    seed: int = 0
    data: tuple[str, ...] = ()
    """Text files or folders; empty = the Python standard library's *.py files."""
    tokenizer: str = "byte"
    """byte (vocab 256) or bpe (byte-level BPE trained locally on the training split, data.py)."""
    vocab_size: int = 0
    """Tokens; 0 = the tokenizer's default (256 for byte, BPE_DEFAULT_VOCAB for bpe)."""
    device: str = "cpu"
    """cpu or cuda (worker i takes GPU LOCAL_RANK, else i mod the GPU count; device.py)."""
    precision: str = "fp32"
    """fp32, or bf16 autocast for forward passes (weights, optimizer and syncs stay fp32)."""
    comm_backend: str = "gloo"
    """Outer sync transport: gloo on host tensors, or nccl on GPU tensors (needs device cuda)."""
    eval_every: int = 1
    """Validation every this many outer rounds (ddp: counted in H-step blocks)."""
    eval_batches: int = 8
    """Validation batches (of batch_size sequences) per evaluation; the same batches every time."""
    checkpoint_every: int = 0
    """Checkpoint every this many outer rounds (0 = only at the end)."""
    stop_after_rounds: int = 0
    """Stop (as if interrupted) after this many rounds in this invocation; 0 = run to the end."""
    faults: tuple[str, ...] = ()
    """Fault specs, e.g. 'kill w2@step300' (see faults.FaultPlan.parse)."""
    collective_timeout_s: float = 10.0
    heartbeat_timeout_s: float = 3.0
    run_timeout_s: float = 3600.0
    """Hard bound on the whole run: the supervisor kills every worker after it."""
    rejoin_timeout_s: float = 60.0
    """How long the group holds a round boundary for a planned rejoin before going on without it."""
    trust: str = "trusted"
    """trusted | untrusted: picks the default aggregation rule (see ``aggregator``)."""
    aggregator: str = ""
    """Aggregation rule of the outer step (outer.make_rule / robust.py); "" = default_aggregator:
    trimmed_mean with 3 or more workers or an untrusted run, mean for a trusted run of 1-2 workers."""
    attacks: tuple[str, ...] = ()
    """Attack specs 'WORKER:KIND[=VALUE][@stepN]' (attacks.parse_attack): what a worker sends instead
    of its honest update."""
    divergence_factor: float = 1.5
    """A run has diverged when its loss exceeds this multiple of a uniform guess's loss, ln(vocab) nats
    (assumption: an untrained model starts near 1.0x; nothing that trains honestly gets to 1.5x)."""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(
            self.algorithm in ALGORITHMS,
            "algorithm",
            f"one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}",
        )
        require(self.codec in CODECS, "codec", f"one of {', '.join(CODECS)}, got {self.codec!r}")
        require(
            self.model in MODEL_PRESETS, "model", f"one of {', '.join(MODEL_PRESETS)}, got {self.model!r}"
        )
        require(1 <= self.workers <= 64, "workers", f"an integer in 1..64, got {self.workers}")
        require(self.steps >= 1, "steps", f"an integer >= 1, got {self.steps}")
        require(self.inner_steps >= 1, "inner-steps", f"an integer >= 1, got {self.inner_steps}")
        preset = MODEL_PRESETS[self.model]
        for name in ("n_layer", "n_head", "n_embd", "block_size", "batch_size"):
            value = getattr(self, name)
            require(value >= 0, name, f"an integer >= 0 (0 = preset), got {value}")
            if value == 0:
                object.__setattr__(self, name, preset[name])
        require(self.n_embd % self.n_head == 0, "n_embd", f"must be a multiple of n_head={self.n_head}")
        require(
            self.tokenizer in TOKENIZERS,
            "tokenizer",
            f"one of {', '.join(TOKENIZERS)}, got {self.tokenizer!r}",
        )
        if self.tokenizer == "byte":
            require(
                self.vocab_size in (0, 256),
                "vocab-size",
                f"256 (or 0) with tokenizer byte, got {self.vocab_size}",
            )
            object.__setattr__(self, "vocab_size", 256)
        else:
            require(
                self.vocab_size == 0 or 257 <= self.vocab_size <= 65536,
                "vocab-size",
                f"an integer in 257..65536 for bpe (0 = {BPE_DEFAULT_VOCAB}), got {self.vocab_size}",
            )
            object.__setattr__(self, "vocab_size", self.vocab_size or BPE_DEFAULT_VOCAB)
        require(self.device in DEVICES, "device", f"one of {', '.join(DEVICES)}, got {self.device!r}")
        require(
            self.precision in PRECISIONS,
            "precision",
            f"one of {', '.join(PRECISIONS)}, got {self.precision!r}",
        )
        require(
            self.comm_backend in COMM_BACKENDS,
            "comm-backend",
            f"one of {', '.join(COMM_BACKENDS)}, got {self.comm_backend!r}",
        )
        require(
            self.comm_backend != "nccl" or self.device == "cuda",
            "comm-backend",
            "nccl needs --device cuda (gloo works with either device)",
        )
        require(self.eval_batches >= 1, "eval-batches", f"an integer >= 1, got {self.eval_batches}")
        require(0 < self.inner_lr < 1, "inner-lr", f"in (0, 1), got {self.inner_lr}")
        require(0 < self.outer_lr <= 2, "outer-lr", f"in (0, 2], got {self.outer_lr}")
        require(0 <= self.outer_momentum < 1, "outer-momentum", f"in [0, 1), got {self.outer_momentum}")
        require(0 <= self.mixing_alpha <= 1, "mixing-alpha", f"in [0, 1], got {self.mixing_alpha}")
        require(0 < self.topk_fraction <= 1, "topk-fraction", f"in (0, 1], got {self.topk_fraction}")
        require(self.block >= 2, "block", f"an integer >= 2, got {self.block}")
        require(self.link_up_bits_per_s > 0 and self.link_down_bits_per_s > 0, "link", "rates must be > 0")
        require(self.link_latency_s >= 0 and self.link_jitter_s >= 0, "link", "latency and jitter >= 0")
        require(
            self.link_mode in LINK_MODES,
            "link-mode",
            f"one of {', '.join(LINK_MODES)}, got {self.link_mode!r}",
        )
        for name in ("link_loss_up", "link_loss_down"):
            value = getattr(self, name)
            require(0 <= value <= 0.5, "loss", f"a probability in [0, 0.5], got {value}")
        require(self.relay_down_bits_per_s > 0, "relay-down", "must be > 0 bit/s")
        require(
            self.link_mode == "virtual" or self.algorithm != "streaming",
            "link-mode",
            "real supports ddp and diloco (streaming's overlapped transfer runs on the virtual clock only)",
        )
        self._check_decoupled()
        require(self.collective_timeout_s > 0, "collective-timeout", "must be > 0 s")
        require(self.run_timeout_s > 0, "run-timeout", "must be > 0 s")
        require(self.rejoin_timeout_s >= 0, "rejoin-timeout", "must be >= 0 s")
        if self.algorithm == "streaming":
            require(self.fragments >= 1, "fragments", f"an integer >= 1, got {self.fragments}")
            require(
                self.inner_steps % self.fragments == 0,
                "inner-steps",
                f"must be a multiple of fragments={self.fragments} for streaming, got {self.inner_steps}",
            )
            require(
                0 <= self.overlap_steps < self.inner_steps // self.fragments,
                "overlap-steps",
                f"tau in [0, H/P={self.inner_steps // self.fragments}), got {self.overlap_steps}",
            )
        require(
            self.steps % self.round_steps == 0,
            "steps",
            f"must be a multiple of {self.round_steps} (inner steps per round), got {self.steps}",
        )
        from dispersal.testbed.faults import FaultPlan  # local: faults imports nothing heavy

        FaultPlan.parse(self.faults)  # validates; raises InputError("fault", ...)
        require(self.trust in TRUST, "trust", f"one of {', '.join(TRUST)}, got {self.trust!r}")
        require(self.divergence_factor > 1, "divergence-factor", f"> 1, got {self.divergence_factor}")
        rules = aggregator_names()
        object.__setattr__(
            self, "aggregator", self.aggregator or default_aggregator(self.trust, self.workers)
        )
        require(
            self.aggregator in rules,
            "aggregator",
            f"one of {', '.join(rules)}, got {self.aggregator!r}",
        )
        require(
            self.aggregator != "gauntlet" or self.link_mode == "virtual",
            "aggregator",
            "gauntlet scores updates on the workers' model copies: use --link-mode virtual",
        )
        for text in self.attacks:
            worker = check_attack(text)
            require(
                int(worker[1:]) < self.workers,
                "attack",
                f"worker {worker} does not exist (w0..w{self.workers - 1})",
            )

    def _check_decoupled(self) -> None:
        require(self.merge in MERGES, "merge", f"one of {', '.join(MERGES)}, got {self.merge!r}")
        require(
            self.merge == "mean" or self.algorithm == "decoupled",
            "merge",
            "is the decoupled syncer's rule (use --aggregator for the other algorithms)",
        )
        require(
            0 <= self.quorum <= self.workers,
            "quorum",
            f"an integer in 0..workers={self.workers} (0 = majority), got {self.quorum}",
        )
        require(
            math.isfinite(self.sync_deadline_s) and 0 < self.sync_deadline_s <= 3600,
            "sync-deadline",
            f"seconds in (0, 3600], got {self.sync_deadline_s}",
        )
        require(0 <= self.max_staleness <= 1000, "max-staleness", f"in 0..1000, got {self.max_staleness}")
        if self.algorithm == "decoupled":
            require(
                self.link_mode == "virtual",
                "link-mode",
                "decoupled runs on the virtual-clock link (the relay serves synchronous rounds)",
            )
            require(
                self.device == "cpu", "device", "decoupled learners run on the cpu (the syncer holds fp32)"
            )
            bad = [
                f for f in self.faults if f.split(" ", 1)[0] not in ("kill", "rejoin", "straggle", "corrupt")
            ]
            require(not bad, "fault", f"decoupled takes kill, rejoin, straggle, corrupt; got {bad[:1]}")
            require(
                all("/" not in f for f in self.faults if f.startswith("kill")),
                "fault",
                "decoupled has no all_gather or group checkpoint: kill wN@stepS without a /phase",
            )
            require(
                self.checkpoint_every == 0 and self.stop_after_rounds == 0,
                "checkpoint-every",
                "decoupled writes no checkpoints yet (no --checkpoint-every, --stop-after, --resume)",
            )

    @property
    def effective_quorum(self) -> int:
        """Decoupled: the quorum the syncer uses (``quorum``, or a majority when it is 0)."""
        return self.quorum or self.workers // 2 + 1

    @property
    def round_steps(self) -> int:
        """Inner steps per outer round: 1 (ddp), H (diloco), H/P (streaming: one fragment per round)."""
        if self.algorithm == "ddp":
            return 1
        if self.algorithm == "streaming":
            return self.inner_steps // self.fragments
        return self.inner_steps

    @property
    def rounds(self) -> int:
        return self.steps // self.round_steps

    def gpt_kwargs(self) -> dict[str, int]:
        """Keyword arguments of gpt.GPTConfig for this run's model."""
        return {
            "n_layer": self.n_layer,
            "n_head": self.n_head,
            "n_embd": self.n_embd,
            "block_size": self.block_size,
            "vocab_size": self.vocab_size,
        }

    @property
    def worker_ids(self) -> list[str]:
        return [f"w{i}" for i in range(self.workers)]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for k, v in d.items():
            if isinstance(v, float) and math.isinf(v):
                d[k] = "inf"
            elif isinstance(v, tuple):
                d[k] = list(v)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TestbedConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise InputError(sorted(unknown)[0], "unknown config field")
        kw = dict(d)
        for k, v in kw.items():
            if v == "inf":
                kw[k] = math.inf
            elif isinstance(v, list):
                kw[k] = tuple(v)
        return cls(**kw)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)
