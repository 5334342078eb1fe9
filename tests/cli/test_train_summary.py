"""`dispersal train`'s printed summary line says what ran: algorithm, workers, links (and for
decoupled DiLoCo the merge rule and quorum), so a pasted result is not ambiguous."""

from __future__ import annotations

from dispersal.cli.train import _what_ran
from dispersal.testbed.config import TestbedConfig


def test_summary_names_the_algorithm_links_and_merge_rule() -> None:
    cfg = TestbedConfig(
        algorithm="decoupled",
        workers=3,
        merge="norm_preserving",
        link_up_bits_per_s=100e6,
        link_down_bits_per_s=1e9,
        link_latency_s=0.1,
    )
    got = _what_ran(cfg, {"quorum": 2, "merge": "norm_preserving"})
    assert got == {
        "algorithm": "decoupled",
        "workers": 3,
        "link": "100 Mbps up / 1 Gbps down, 100 ms (virtual)",
        "merge": "norm_preserving",
        "quorum": 2,
    }
    assert _what_ran(TestbedConfig(), {}) == {"algorithm": "diloco", "workers": 4, "link": "instant"}


def test_aggregator_help_names_the_real_defaults() -> None:
    """The help read "robust.UNTRUSTED_DEFAULT (clip when written)" (an internal name, and the rule is
    trimmed_mean); it must name testbed.robust's defaults."""
    import typer

    from dispersal.cli import app
    from dispersal.testbed.robust import TRUSTED_DEFAULT, UNTRUSTED_DEFAULT

    cmd = typer.main.get_command(app).commands["train"]  # type: ignore[attr-defined]
    (opt,) = [p for p in cmd.params if p.name == "aggregator"]
    assert opt.help.endswith(
        f"Default: {UNTRUSTED_DEFAULT} with 3 or more workers or --trust untrusted, else {TRUSTED_DEFAULT}."
    )
