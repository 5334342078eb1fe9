"""Notes of the pipeline algorithms say nothing false: `--algorithm site_pp_diloco` on a model that fits
one node fell back to a 1-stage pp_diloco and claimed "the model does not fit one node: 1-stage
pipeline parallelism forced"."""

from __future__ import annotations

from dispersal.model import estimate
from dispersal.model.inputs.presets import load_scenario


def test_site_fallback_does_not_claim_a_forced_pipeline() -> None:
    e = estimate(load_scenario("paper_threat_model").replace(algorithm="site_pp_diloco"), mode="default")
    assert e.algorithm == "pp_diloco" and e.to_dict()["pipeline_stages"] == 1
    assert not any("does not fit one node" in n for n in e.notes), e.notes
    assert any("ran pp_diloco instead of site_pp_diloco" in n for n in e.notes)


def test_auto_still_notes_a_forced_wan_pipeline() -> None:
    s = load_scenario("paper_threat_model").replace(algorithm="auto", params=2e12, num_nodes=64)
    e = estimate(s, mode="default")
    assert e.algorithm == "pp_diloco" and e.to_dict()["pipeline_stages"] > 1
    stages = e.to_dict()["pipeline_stages"]
    assert any(f"{stages}-stage pipeline parallelism forced" in n for n in e.notes), e.notes


def test_decoupled_note_gives_the_delivery_interval_in_a_readable_unit() -> None:
    """INTELLECT-1's sites under decoupled DiLoCo deliver every 100 steps of ~21 s: the note read
    "(2.1e+03 s)"."""
    s = load_scenario("intellect1_schedule").replace(algorithm="decoupled")
    (note,) = [n for n in estimate(s, mode="default").notes if n.startswith("decoupled:")]
    assert "e+" not in note and " min); merges arrive" in note, note


def test_paper_mode_ddp_codec_note_matches_the_bytes_sent() -> None:
    """Paper mode's ddp sends dense gradients at the precision's bits; the note claimed the 150x
    ratio (0.0533 bits per parameter) while the payload was 8 bits per parameter."""
    s = load_scenario("paper_threat_model").replace(algorithm="ddp", codec="demo")
    e = estimate(s, mode="paper")
    (note,) = [n for n in e.notes if "codec=demo" in n]
    bits = e.payload_bytes_per_sync * 8 / s.params
    assert (
        note
        == f"paper mode ignores codec=demo: ddp sends dense {s.precision.value} gradients ({bits:g} bits per parameter) every step"
    )


def test_decoupled_site_pacing_note_reads_once() -> None:
    """The decoupled unit's pacing on mixed sites named the quorum with a doubled article
    ("paced by the the quorum's round trip")."""
    s = load_scenario("intellect1_schedule").replace(algorithm="decoupled")
    e = estimate(s, mode="default")
    assert e.sync_pacing.startswith("quorum's round trip (2 of 4 learners")
    assert not [n for n in e.notes if "the the" in n], e.notes


def test_resilience_of_a_site_table_scenario_counts_its_sites_not_its_nodes() -> None:
    """A scenario with [[site]] tables: the fleet's sites are its sites with nodes (INTELLECT-1's
    schedule starts with all 4 nodes at one site; the report said "4 sites")."""
    from dispersal.present.resilience import DEFAULTS, fleet_spec, resilience

    est = estimate(load_scenario("intellect1_schedule"), mode="default").to_dict()
    assert est["num_nodes"] == 4 and [row["name"] for row in est["sites"]] == ["us"]
    spec, _ = fleet_spec(est, DEFAULTS)
    assert spec.sites == 1
    out = resilience(est, DEFAULTS, points=5)
    assert "1 site (the scenario's sites with nodes as first listed" in out["caption"], out["caption"]
    assert "1 of 1 site goes dark" in out["site_loss_caption"]
    # Without site tables a node is a site, as before.
    plain = estimate(load_scenario("intellect1"), mode="default").to_dict()
    assert fleet_spec(plain, DEFAULTS)[0].sites == plain["num_nodes"]
