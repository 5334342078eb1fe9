"""Where a worker computes and how it syncs: device choice, bf16 autocast, compute clock, transport.

* ``--device cpu`` (default) changes nothing: gloo, fp32 unless ``--precision bf16``, the compute
  clock is the worker thread's CPU time (wall time with ``--realtime``).
* ``--device cuda``: the model, its gradients and the inner AdamW live on the GPU. The flat vectors
  of the outer loop (global weights, outer momentum, pseudo-gradients, codec payloads) stay in host
  memory, so the codecs, CRC32 checks and byte counts are the same code on either device. Compute is
  timed with CUDA events on the current stream (``torch.cuda.Event(enable_timing=True)``), so
  asynchronous kernel launches are not mistaken for finished work.
* ``--comm-backend nccl`` moves each sync frame to the GPU for the all-gather (process group
  ``cpu:gloo,cuda:nccl``: object broadcasts and the final counter exchange stay on gloo), and back
  to the host for checking. ``gloo`` (default) all-gathers the host frames.

Which GPU: ``LOCAL_RANK`` when a launcher sets it (torchrun), else worker index mod GPU count.
"""

from __future__ import annotations

import os
import time
from contextlib import AbstractContextManager

import torch

from dispersal.model.inputs.errors import InputError

CUDA_CLOCK_REBASE_S = 60.0
"""The CUDA-event clock starts a new reference event after this many seconds: elapsed times come back
as float32 milliseconds, whose resolution at 60 s (about 4 microseconds) is still far below a step."""


def resolve_device(name: str, worker_index: int = 0) -> torch.device:
    """The torch device for ``--device NAME``; selects (``set_device``) the GPU for ``cuda``."""
    if name == "cpu":
        return torch.device("cpu")
    if name != "cuda":
        raise InputError("device", f"one of cpu, cuda, got {name!r}")
    if not torch.cuda.is_available():
        raise InputError(
            "device",
            f"cuda requested but torch {torch.__version__} sees no GPU (torch.cuda.is_available() is False)",
        )
    count = torch.cuda.device_count()
    local = os.environ.get("LOCAL_RANK")
    index = int(local) if local is not None else worker_index % count
    if not 0 <= index < count:
        raise InputError("device", f"LOCAL_RANK={index} but this host has {count} GPU(s)")
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def process_group_backend(device: torch.device, comm_backend: str) -> str:
    """``init_process_group`` backend string: gloo, or gloo for host tensors + NCCL for GPU tensors."""
    if comm_backend == "gloo":
        return "gloo"
    if comm_backend == "nccl":
        if device.type != "cuda":
            raise InputError("comm-backend", "nccl needs --device cuda (gloo works with either device)")
        return "cpu:gloo,cuda:nccl"
    raise InputError("comm-backend", f"one of gloo, nccl, got {comm_backend!r}")


def comm_device(device: torch.device, comm_backend: str) -> torch.device:
    """Where a sync frame must be for the all-gather: the GPU with NCCL, the host with gloo."""
    return device if comm_backend == "nccl" else torch.device("cpu")


def autocast(device: torch.device, precision: str) -> AbstractContextManager[object]:
    """bf16 autocast on ``device`` for ``precision == "bf16"``; a disabled (no-op) context for fp32."""
    if precision not in ("fp32", "bf16"):
        raise InputError("precision", f"one of fp32, bf16, got {precision!r}")
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


class ComputeClock:
    """``now()`` in seconds for charging compute: differences between two calls are compute time.

    cpu: ``time.thread_time()`` (this thread's CPU time, so processes sharing cores do not charge each
    other's time slices) or ``time.perf_counter()`` with ``realtime``. cuda: CUDA events recorded on the
    current stream and waited for, so a reading includes every kernel queued before it.
    """

    def __init__(self, device: torch.device, realtime: bool = False) -> None:
        self.device, self.realtime = device, realtime
        self.kind = "cuda-events" if device.type == "cuda" else ("wall" if realtime else "thread-cpu")
        if self.kind == "cuda-events":
            self._origin = self._record()
            self._base_s = 0.0

    def _record(self) -> torch.cuda.Event:
        e = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        e.record()
        e.synchronize()
        return e

    def now(self) -> float:
        if self.kind == "thread-cpu":
            return time.thread_time()
        if self.kind == "wall":
            return time.perf_counter()
        e = self._record()
        since = float(self._origin.elapsed_time(e)) / 1000.0
        if since > CUDA_CLOCK_REBASE_S:
            self._origin, self._base_s = e, self._base_s + since
            return self._base_s
        return self._base_s + since
