"""Device selection, bf16 autocast, the compute clock and the process-group backend, on CPU.

The CUDA and NCCL paths cannot run without a GPU: their selection logic is tested here with
``torch.cuda`` stubbed at the boundary; ``benchmarks/gpu_smoke.py`` exercises them on a GPU.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from dispersal.model.inputs.errors import InputError  # noqa: E402
from dispersal.testbed.config import TestbedConfig  # noqa: E402
from dispersal.testbed.device import (  # noqa: E402
    ComputeClock,
    autocast,
    comm_device,
    process_group_backend,
    resolve_device,
)
from dispersal.testbed.gpt import GPT, GPTConfig, configure_adamw  # noqa: E402
from dispersal.testbed.outer import flat_grads, flat_params, set_flat_grads  # noqa: E402
from dispersal.testbed.supervisor import run_local  # noqa: E402

pytestmark = pytest.mark.torch
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")


@pytest.fixture(autouse=True)
def one_thread() -> object:
    """One intra-op thread, as every worker: on 2 shared cores two threads make tiny steps 30x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_cpu_device_and_backends() -> None:
    cpu = resolve_device("cpu", worker_index=3)
    assert cpu == torch.device("cpu")
    assert process_group_backend(cpu, "gloo") == "gloo"
    assert comm_device(cpu, "gloo") == cpu
    gpu = torch.device("cuda", 1)
    assert process_group_backend(gpu, "gloo") == "gloo"
    assert comm_device(gpu, "gloo") == torch.device("cpu")  # gloo all-gathers host frames
    assert process_group_backend(gpu, "nccl") == "cpu:gloo,cuda:nccl"
    assert comm_device(gpu, "nccl") == gpu
    with pytest.raises(InputError, match="comm-backend"):
        process_group_backend(cpu, "nccl")
    with pytest.raises(InputError, match="device"):
        resolve_device("tpu")


@no_cuda
def test_cuda_without_a_gpu_is_a_one_line_error(tmp_path: Path) -> None:
    """``dispersal train --device cuda`` on a machine without one: one line, exit 2. Through the CLI
    app in-process (CliRunner), as the other command-line checks: a subprocess only added a torch
    import; an uncaught exception (a traceback) would show as exit 1 with the exception kept."""
    from typer.testing import CliRunner

    from dispersal.cli import app

    with pytest.raises(InputError, match=r"^device: cuda requested"):
        resolve_device("cuda")
    res = CliRunner().invoke(app, ["train", "--device", "cuda", "--out", str(tmp_path)])
    text = res.output.strip()
    assert res.exit_code == 2 and len(text.splitlines()) == 1 and "device: cuda" in text, (
        text,
        res.exception,
    )
    with pytest.raises(InputError, match="comm-backend"):
        TestbedConfig(comm_backend="nccl")  # nccl with the default cpu device


def test_gpu_index_from_local_rank_or_worker_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """With 2 GPUs: LOCAL_RANK wins (torchrun); otherwise worker i takes GPU i mod 2."""
    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert [resolve_device("cuda", i).index for i in range(5)] == [0, 1, 0, 1, 0]
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert resolve_device("cuda", 0) == torch.device("cuda", 1)
    assert chosen == [0, 1, 0, 1, 0, 1]
    monkeypatch.setenv("LOCAL_RANK", "2")
    with pytest.raises(InputError, match="LOCAL_RANK=2"):
        resolve_device("cuda", 0)


def _model(precision: str) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=16), precision=precision)


def test_bf16_autocast_on_cpu() -> None:
    """bf16: matmuls (logits) in bf16, loss and gradients fp32, close to fp32; fp32 is untouched."""
    x = torch.randint(0, 256, (4, 16), generator=torch.Generator().manual_seed(1))
    fp32, bf16 = _model("fp32"), _model("bf16")
    logits32, loss32 = fp32(x, x)
    logits16, loss16 = bf16(x, x)
    assert logits32.dtype == torch.float32 and logits16.dtype == torch.bfloat16
    assert loss16.dtype == torch.float32
    assert abs(loss16.item() - loss32.item()) < 0.02 * loss32.item()
    assert not torch.equal(logits16.float(), logits32)  # autocast really ran
    loss16.backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in bf16.parameters())
    assert all(p.dtype == torch.float32 for p in bf16.parameters())
    with autocast(torch.device("cpu"), "fp32"):
        assert torch.equal(fp32(x, x)[0], logits32)  # the fp32 context is a no-op
    with pytest.raises(InputError, match="precision"):
        autocast(torch.device("cpu"), "fp16")
    with pytest.raises(ValueError, match="precision"):
        _model("int8")


@pytest.mark.slow
def test_bf16_training_lowers_the_loss() -> None:
    model = _model("bf16")
    opt = configure_adamw(model, 1e-2, 0.0)
    x = torch.randint(0, 256, (8, 16), generator=torch.Generator().manual_seed(2))
    first: float | None = None
    for _ in range(12):
        _, loss = model(x, x)
        first = first if first is not None else loss.item()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    assert first is not None and math.isfinite(loss.item()) and loss.item() < 0.5 * first


def test_compute_clock_counts_cpu_time_not_sleep() -> None:
    cpu_clock = ComputeClock(torch.device("cpu"))
    wall_clock = ComputeClock(torch.device("cpu"), realtime=True)
    assert (cpu_clock.kind, wall_clock.kind) == ("thread-cpu", "wall")
    c0, w0 = cpu_clock.now(), wall_clock.now()
    time.sleep(0.2)
    assert cpu_clock.now() - c0 < 0.05 and wall_clock.now() - w0 >= 0.2
    # It is the thread's CPU clock (resp. perf_counter), read at call time.
    assert abs(cpu_clock.now() - time.thread_time()) < 0.01
    assert abs(wall_clock.now() - time.perf_counter()) < 0.01


def test_flat_vectors_live_on_the_host_and_grads_stay_views_on_cpu() -> None:
    model = _model("fp32")
    x = torch.randint(0, 256, (2, 16))
    model(x, x)[1].backward()
    params = list(model.parameters())
    assert flat_params(params).device.type == "cpu" and flat_grads(params).device.type == "cpu"
    flat = torch.arange(sum(p.numel() for p in params), dtype=torch.float32)
    set_flat_grads(params, flat)
    grad = params[0].grad
    assert grad is not None and grad.data_ptr() == flat.data_ptr()  # no copy on CPU


@pytest.mark.slow
def test_bf16_run_with_real_processes_tracks_fp32(tmp_path: Path) -> None:
    """Two worker processes, DiLoCo, bf16 autocast on CPU vs fp32 from the same seed: both complete, the
    validation curves agree within 3 % round by round, and training got well below ln 256 = 5.55."""

    def run(precision: str) -> list[float]:
        cfg = TestbedConfig(
            algorithm="diloco", workers=2, steps=20, inner_steps=5, precision=precision, eval_batches=2
        )
        out = tmp_path / precision
        summary = run_local(cfg, out)
        assert summary["completed"], summary
        assert summary["config"]["precision"] == precision
        return [json.loads(ln)["val_loss"] for ln in (out / "metrics.jsonl").read_text().splitlines()]

    curves = {precision: run(precision) for precision in ("fp32", "bf16")}
    assert len(curves["bf16"]) == len(curves["fp32"]) == 4
    for a, b in zip(curves["fp32"], curves["bf16"], strict=True):
        assert math.isfinite(b) and abs(b - a) < 0.03 * a
    assert curves["bf16"] != curves["fp32"]  # bf16 really changed the arithmetic
    assert min(curves["bf16"]) < 4.0
