"""This test process's descendants, read from /proc: the supervisor's fork server, its workers and
anything they started (tests/testbed/test_hostile.py, test_honest.py)."""

from __future__ import annotations

import os
from pathlib import Path


def descendants(root: int | None = None) -> set[int]:
    """The pids whose chain of parents reaches ``root`` (default: this process), ``root`` included."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone since the listing
    ours, grew = {os.getpid() if root is None else root}, True
    while grew:
        kids = {p for p, pp in parent.items() if pp in ours} - ours
        ours |= kids
        grew = bool(kids)
    return ours
