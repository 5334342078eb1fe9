"""The units module: the only place human units are parsed and printed (decimal prefixes)."""

from __future__ import annotations

import pytest

from dispersal.model.inputs import units
from dispersal.model.inputs.errors import InputError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100 Mbps", 100e6),
        ("100Mbps", 100e6),
        ("1 Gbit/s", 1e9),
        ("12.5 MB/s", 100e6),
        ("10 Bps", 80.0),
        ("2.5e3 kbps", 2.5e6),
        ("1 Gibps", 2.0**30),
        (5e6, 5e6),
        ("42", 42.0),
    ],
)
def test_parse_bandwidth(text: str | float, expected: float) -> None:
    assert units.parse_bandwidth(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100 ms", 0.1),
        ("740d", 740 * 86400.0),
        ("1.5 y", 1.5 * 365.25 * 86400),
        ("2 h", 7200.0),
        ("30 min", 1800.0),
        ("5 us", 5e-6),
        ("3", 3.0),
        ("1 week", 7 * 86400.0),
    ],
)
def test_parse_duration(text: str, expected: float) -> None:
    assert units.parse_duration(text) == pytest.approx(expected, rel=1e-12)


def test_parse_bytes_decimal_and_binary() -> None:
    assert units.parse_bytes("80 GB") == 80e9
    assert units.parse_bytes("80 GiB") == 80 * 2**30
    assert units.parse_bytes("4 TB") == 4e12


@pytest.mark.parametrize(
    ("text", "expected"), [("405B", 405e9), ("15T", 15e12), ("70M", 70e6), ("1e9", 1e9), ("2.5k", 2500.0)]
)
def test_parse_count(text: str, expected: float) -> None:
    assert units.parse_count(text) == pytest.approx(expected, rel=1e-12)


def test_parse_flop_money_distance() -> None:
    assert units.parse_flop("1e25 FLOP") == 1e25
    assert units.parse_flop("1 ZFLOP") == 1e21
    assert units.parse_flop("3.8e25") == 3.8e25
    assert units.parse_money("$1.6M") == pytest.approx(1.6e6, rel=1e-12)
    assert units.parse_money("3,800,000") == 3.8e6
    assert units.parse_distance("1000km") == 1e6
    assert units.parse_distance("1 mi") == 1609.344


def test_parse_up_down() -> None:
    assert units.parse_up_down("100Mbps") == (100e6, 100e6)
    assert units.parse_up_down("57Mbps/310Mbps") == (57e6, 310e6)
    assert units.parse_up_down("1 Gbit/s") == (1e9, 1e9)
    assert units.parse_up_down("1 Gbit/s/10 Gbit/s") == (1e9, 10e9)


@pytest.mark.parametrize(
    ("func", "text"),
    [
        (units.parse_bandwidth, "100 Mbananas"),
        (units.parse_bandwidth, "fast"),
        (units.parse_duration, "3 fortnights"),
        (units.parse_count, "12X"),
        (units.parse_bytes, "8 GHz"),
        (units.parse_flop, "1e25 FLAP"),
        (units.parse_distance, "3 parsecs"),
        (units.parse_bandwidth, "inf Mbps"),
        (units.parse_bandwidth, True),
        (units.parse_up_down, "1/2/3"),
    ],
)
def test_parse_errors_name_the_field(func, text) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as err:
        func(text, "my_field")
    assert str(err.value).startswith("my_field: ")
    assert err.value.field == "my_field"
    assert "\n" not in str(err.value)


def test_format() -> None:
    assert units.format_bandwidth(100e6) == "100 Mbps"
    assert units.format_duration(740 * 86400.0) == "2.03 y"
    assert units.format_duration(0.1) == "100 ms"
    assert units.format_bytes(80e9) == "80 GB"
    assert units.format_money(1.6e6) == "$1.6M"
    assert units.format_money(3.8e9) == "$3.8B"
    assert units.format_count(405e9) == "405B"
    assert units.format_flop(1e25) == "1e+25 FLOP"
    assert units.format_bandwidth(float("inf")) == "inf"


@pytest.mark.parametrize("v", [1.0, 999.0, 1e3, 123456.0, 1e8, 5.5e12])
def test_round_trip_examples(v: float) -> None:
    assert units.parse_bandwidth(units.format_bandwidth(v, 15)) == pytest.approx(v, rel=1e-12)
    assert units.parse_bytes(units.format_bytes(v, 15)) == pytest.approx(v, rel=1e-12)
    assert units.parse_count(units.format_count(v, 15)) == pytest.approx(v, rel=1e-12)
    assert units.parse_duration(units.format_duration(v, 15)) == pytest.approx(v, rel=1e-12)
