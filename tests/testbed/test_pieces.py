"""Unit tests of the testbed's pieces: outer step, codecs, link, faults, config, payload checks."""

from __future__ import annotations

import math
import random
import zlib

import pytest

torch = pytest.importorskip("torch")

from dispersal.model.inputs.errors import InputError  # noqa: E402
from dispersal.testbed.codecs import CRC_BYTES, BlockQuantCodec, TopKCodec, make_codec  # noqa: E402
from dispersal.testbed.config import TestbedConfig, parse_link  # noqa: E402
from dispersal.testbed.faults import FaultPlan  # noqa: E402
from dispersal.testbed.link import EmulatedWanLink, InstantLink, predicted_sync_s, relay_finish_s  # noqa: E402
from dispersal.testbed.outer import NesterovOuter  # noqa: E402
from dispersal.testbed.wire import check_payload  # noqa: E402

pytestmark = pytest.mark.torch


def test_outer_nesterov_hand_worked() -> None:
    """Two outer steps, lr 0.7, momentum 0.9, worked by hand.

    step 1: b = d1 = [0.5, 0.25]; theta -= 0.7 (d1 + 0.9 b) = 0.7 [0.95, 0.475] -> [0.335, -2.3325]
    step 2: b = 0.9 b + d2 = [0.35, 0.425]; update = d2 + 0.9 b = [0.215, 0.5825] -> [0.1845, -2.74025]
    """
    theta = torch.tensor([1.0, -2.0])
    outer = NesterovOuter(2, lr=0.7, momentum=0.9)
    outer.step(theta, torch.tensor([0.5, 0.25]))
    assert theta.tolist() == pytest.approx([0.335, -2.3325], abs=1e-6)
    outer.step(theta, torch.tensor([-0.1, 0.2]))
    assert theta.tolist() == pytest.approx([0.1845, -2.74025], abs=1e-6)
    assert outer.buf.tolist() == pytest.approx([0.35, 0.425], abs=1e-7)


@pytest.mark.slow
def test_outer_matches_torch_sgd_nesterov_and_fragments() -> None:
    """Same as torch.optim.SGD(nesterov=True) with the pseudo-gradient as .grad; a fragment step touches only its indices."""
    g = torch.Generator().manual_seed(0)
    theta = torch.randn(10, generator=g)
    p = torch.nn.Parameter(theta.clone())
    sgd = torch.optim.SGD([p], lr=0.7, momentum=0.9, nesterov=True)
    outer = NesterovOuter(10)
    for _ in range(3):
        delta = torch.randn(10, generator=g)
        outer.step(theta, delta)
        p.grad = delta.clone()
        sgd.step()
    assert torch.allclose(theta, p.detach(), atol=1e-6)
    idx = torch.tensor([1, 3])
    before = theta.clone()
    outer.step(theta, torch.tensor([1.0, 1.0]), idx)
    mask = torch.ones(10, dtype=torch.bool)
    mask[idx] = False
    assert torch.equal(theta[mask], before[mask]) and not torch.equal(theta[idx], before[idx])


@pytest.mark.parametrize("n", [1, 7, 63, 64, 65, 1000])
def test_codec_byte_counts_are_exact(n: int) -> None:
    """Payload length equals the documented size: values + block scales (+ indices)."""
    x = torch.randn(n)
    expected = {
        "none": 4 * n,
        "bf16": 2 * n,
        "int8": n + 4 * math.ceil(n / 64),
        "int4": math.ceil(n / 2) + 4 * math.ceil(n / 64),
        "topk": 8 * max(1, math.ceil(0.01 * n)),
    }
    for name, size in expected.items():
        codec = make_codec(name)
        payload = codec.encode(x)
        assert payload.dtype == torch.uint8
        assert payload.numel() == codec.nbytes(n) == size, name


def test_codec_round_trip_error_bounds() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1000, generator=g) * torch.logspace(-3, 2, 1000)
    assert torch.equal(make_codec("none").decode(make_codec("none").encode(x), 1000), x)
    bf = make_codec("bf16")
    assert ((bf.decode(bf.encode(x), 1000) - x).abs() <= x.abs() * 2**-8).all()
    for bits, qmax in ((8, 127), (4, 7)):
        c = BlockQuantCodec(bits, block=64)
        err = (c.decode(c.encode(x), 1000) - x).abs()
        absmax = torch.nn.functional.pad(x.abs(), (0, 24)).view(-1, 64).amax(1).repeat_interleave(64)[:1000]
        assert (err <= absmax / (2 * qmax) * (1 + 1e-5) + 1e-12).all(), bits


def test_topk_error_feedback_conserves_mass() -> None:
    """What is not sent stays in the residual: decoded + residual == input + previous residual."""
    c = TopKCodec(0.1)
    g = torch.Generator().manual_seed(2)
    carried = torch.zeros(50)
    for _ in range(3):
        x = torch.randn(50, generator=g)
        sent = c.decode(c.encode(x), 50)
        assert (sent != 0).sum() == 5
        residual = c.residual
        assert residual is not None
        assert torch.allclose(sent + residual, x + carried, atol=1e-6)
        carried = residual.clone()
    avg = torch.zeros(50)
    avg[[3, 17, 40]] = torch.tensor([1.0, -2.0, 0.5])
    down = c.encode_average(avg)
    assert down.numel() == 3 * 8 and torch.equal(c.decode(down, 50), avg)


def test_payload_checks_reject_corrupt_and_non_finite() -> None:
    codec = make_codec("none")
    good = codec.encode(torch.ones(8))
    # numpy declares ndarray.__buffer__ (PEP 688) only for Python >= 3.12, so mypy at 3.11 rejects an
    # ndarray as a buffer (it has the buffer protocol on every version): hence the ignores below.
    v, why = check_payload(good, zlib.crc32(good.numpy()), codec, 8)  # type: ignore[arg-type]
    assert v is not None and why == ""
    bad = good.clone()
    bad[0] ^= 0x5A
    assert check_payload(bad, zlib.crc32(good.numpy()), codec, 8) == (None, "checksum")  # type: ignore[arg-type]
    nan = codec.encode(torch.tensor([1.0, float("nan"), 0, 0, 0, 0, 0, 0]))
    v, why = check_payload(nan, zlib.crc32(nan.numpy()), codec, 8)  # type: ignore[arg-type]
    assert v is None and why == "non-finite"


def test_link_charges_the_flat_sync_formula() -> None:
    """up + down with no jitter = 8V/up + 8V/down + latency (spec/model.md sec. 3)."""
    link = EmulatedWanLink(100e6, 50e6, 0.1)
    rng = random.Random(0)
    v = 1_000_000
    assert link.upload_s(v, rng) == pytest.approx(0.08 + 0.05)
    assert link.download_s(v, rng) == pytest.approx(0.16 + 0.05)
    assert link.upload_s(v, rng) + link.download_s(v, rng) == pytest.approx(
        predicted_sync_s(v, 100e6, 50e6, 0.1)
    )
    assert relay_finish_s([1.0, 3.0, 2.0], 0.5) == 3.5  # waits for the slowest upload
    assert InstantLink().upload_s(10**9, rng) == 0.0
    jit = EmulatedWanLink(1e9, 1e9, 0.02, 0.01)
    a = [jit.upload_s(0, random.Random("s")) for _ in range(2)]
    assert a[0] == a[1] and 0.01 <= a[0] <= 0.015


def test_parse_link_and_config_errors_name_the_field() -> None:
    assert parse_link("100Mbps/100ms") == (1e8, 1e8, 0.1, 0.0)
    assert parse_link("57Mbps/310Mbps/40ms/5ms") == (57e6, 310e6, 0.04, 0.005)
    assert parse_link("instant")[0] == math.inf
    with pytest.raises(InputError, match=r"^link:"):
        parse_link("fast")
    with pytest.raises(InputError, match=r"^workers:"):
        TestbedConfig(workers=0)
    with pytest.raises(InputError, match=r"^steps:"):
        TestbedConfig(steps=75, inner_steps=50)
    with pytest.raises(InputError, match=r"^overlap-steps:"):
        TestbedConfig(algorithm="streaming", inner_steps=10, fragments=2, overlap_steps=5, steps=100)
    cfg = TestbedConfig(algorithm="streaming", inner_steps=10, fragments=2, steps=100)
    assert cfg.round_steps == 5 and TestbedConfig.from_dict(cfg.to_dict()) == cfg


def test_fault_plan_parse_and_queries() -> None:
    plan = FaultPlan.parse(
        ["kill w2@step300", "rejoin w2@step500", "straggle w1:3x@100-200", "corrupt w3@step400"]
    )
    assert plan == FaultPlan().kill("w2", 300).rejoin("w2", 500).straggle("w1", 3.0, 100, 200).corrupt(
        "w3", 400
    )
    assert plan.straggle_factor("w1", 150) == 3.0 and plan.straggle_factor("w1", 200) == 1.0
    assert plan.corrupts("w3", 350, 400) and not plan.corrupts("w3", 401, 450)
    assert plan.kill_steps("w2") == [300]
    for bad in ["kill w2", "explode w1@step3", "straggle w1:0.5x@1-2", "straggle w1:2x@5-3"]:
        with pytest.raises(InputError, match=r"^fault:"):
            FaultPlan.parse([bad])


def test_crc_bytes_constant() -> None:
    assert CRC_BYTES == 4
