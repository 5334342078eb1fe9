"""Attack parsing and the update each attacker sends."""

from __future__ import annotations

import math

import pytest
import torch

from dispersal.testbed.attacks import KINDS, Attack, Attacker, parse_attack


def test_parse_forms() -> None:
    assert parse_attack("w2:scale=1e6") == Attack(worker="w2", kind="scale", value=1e6, from_step=0)
    assert parse_attack("2:sign_flip@step40") == Attack(
        worker="w2", kind="sign_flip", value=None, from_step=40
    )
    assert parse_attack(" w0:nan@7 ") == Attack(worker="w0", kind="nan", value=None, from_step=7)
    assert str(parse_attack("w1:noise=3@step5")) == "w1:noise=3@step5"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("w2:explode", "kind 'explode' unknown"),
        ("w2", "expected WORKER:KIND"),
        ("x:scale", "expected WORKER:KIND"),
        ("w2:scale=abc", "value 'abc'"),
        ("w2:nan=3", "takes no value"),
        ("w2:noise=-1", "noise std must be > 0"),
        ("w2:stale=1.5", "stale rounds"),
        ("w2:scale=inf", "finite"),
    ],
)
def test_parse_errors_name_attack(text: str, needle: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_attack(text)
    msg = str(err.value)
    assert msg.startswith("attack:") and needle in msg
    if "kind" in needle or "expected" in needle:
        assert all(k in msg for k in KINDS)


def test_each_kind_sends_what_it_says() -> None:
    u = torch.tensor([1.0, -2.0, 3.0])
    peer = torch.tensor([9.0, 9.0, 9.0])

    def sent(text: str, step: int = 0) -> torch.Tensor:
        return Attacker(parse_attack(text), seed=0).corrupt(u, step=step, peers=[peer])

    assert sent("w1:scale=10").tolist() == [10.0, -20.0, 30.0]
    assert sent("w1:sign_flip").tolist() == [-1.0, 2.0, -3.0]
    assert torch.isnan(sent("w1:nan")).all()
    huge = sent("w1:huge")
    assert torch.isfinite(huge).all() and float(huge[0]) == pytest.approx(3e38)
    assert sent("w1:lazy").tolist() == [0.0, 0.0, 0.0]
    assert sent("w1:copy").tolist() == [9.0, 9.0, 9.0]
    assert Attacker(parse_attack("w1:copy"), seed=0).corrupt(u, step=0).tolist() == u.tolist()
    noisy = sent("w1:noise=1")
    assert not torch.equal(noisy, u) and torch.isfinite(noisy).all()
    assert sent("w1:scale=10@step50", step=49).tolist() == u.tolist()  # not yet active
    assert sent("w1:scale=10@step50", step=50).tolist() == [10.0, -20.0, 30.0]


def test_noise_is_seeded_and_relative() -> None:
    u = torch.randn(4000)
    a = Attacker(parse_attack("w1:noise=2"), seed=3).corrupt(u, step=0)
    b = Attacker(parse_attack("w1:noise=2"), seed=3).corrupt(u, step=0)
    assert torch.equal(a, b)
    rms = float(u.pow(2).mean().sqrt())
    assert float((a - u).std()) == pytest.approx(2 * rms, rel=0.1)


def test_stale_replays_earlier_rounds() -> None:
    att = Attacker(parse_attack("w1:stale=2"), seed=0)
    rounds = [torch.full((2,), float(r)) for r in range(5)]
    out = [att.corrupt(u, step=10 * i).tolist()[0] for i, u in enumerate(rounds)]
    assert out == [0.0, 1.0, 0.0, 1.0, 2.0]  # honest until two rounds are remembered
    late = Attacker(parse_attack("w1:stale@step20"), seed=0)
    out = [late.corrupt(u, step=10 * i).tolist()[0] for i, u in enumerate(rounds)]
    assert out == [0.0, 1.0, 1.0, 2.0, 3.0]


def test_value_defaults() -> None:
    assert parse_attack("w1:scale").resolved_value == 1e6
    assert parse_attack("w1:nan").resolved_value is None
    assert not math.isnan(parse_attack("w1:noise").resolved_value or math.nan)
