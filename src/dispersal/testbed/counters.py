"""What a worker's link counts: bytes each way, messages, and the time it charges (link.py, relaylink.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LinkCounters:
    bytes_sent: int = 0
    bytes_received: int = 0
    messages: int = 0
    comm_exposed_s: float = 0.0
    compute_s: float = 0.0
    clock_s: float = 0.0
    """Virtual wall clock of this worker: compute plus exposed communication."""
    state_bytes: int = 0
    """Bytes received as state transfer when (re)joining; kept apart from the per-sync traffic."""
    wire_bytes_sent: int = 0
    """Real-link mode: every byte this worker put on the shaped link (framing and metadata included)."""
    wire_bytes_received: int = 0
    link_s: float = 0.0
    """Real-link mode: measured wall-clock time of this worker's syncs, summed."""
