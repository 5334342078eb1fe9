"""Bad inputs for every `dispersal` command, shared by the fuzz tests (tests/cli/test_fuzz.py).

Each case is (argv, token): the command must exit 2 with one line on stderr that contains `token`
(compared with '-' and '_' equal, case-insensitive), and no traceback. Paths are placeholders
(``{DIR}``, ``{BADTOML}``...) that the test fills in with files it makes under tmp_path.
"""

from __future__ import annotations

from collections.abc import Iterator

Case = tuple[list[str], str]

#: Numbers that no count, duration, rate or budget accepts.
BAD_NUMBERS = ("nan", "inf", "-inf", "-1", "1e400", "99999999999999999999999", "", "abc", "1,5")
#: As BAD_NUMBERS, for options where 0 is also invalid.
BAD_POSITIVE = (*BAD_NUMBERS, "0")
#: Compute targets no command accepts (99999999999999999999999 FLOP = 1e23 is a valid target).
BAD_TARGETS = ("nan", "inf", "-inf", "-1", "0", "1e400", "1e40", "", "abc", "1,5", "5 parsecs")
#: Text with units that no parser accepts.
BAD_UNITS = ("100parsecs", "12 furlongs", "1e400Mbps", "-5Mbps", "nanMbps", "1/2/3", " ", "1e300Tbps")
BAD_DURATIONS = ("5 lightyears", "-1s", "nan s", "inf", "", "1e400ms", "1e300y")
BAD_ENUM = ("nope", "", "PAPERX")

#: Output-file paths that cannot be written: under a file, a directory in place of a file, the
#: empty path, a folder that cannot be created, and (when not root) a read-only folder.
BAD_OUT_FILES = (
    "/dev/null/x.json",
    "{DIR}",
    "",
    "{FILE}/x.json",
    "/proc/dispersal-x/y.json",
    "{RODIR}/x.json",
)
#: Output-folder paths that cannot be written.
BAD_OUT_DIRS = ("/dev/null/x", "{FILE}", "", "{FILE}/sub", "/proc/dispersal-x", "{RODIR}/sub")
#: Scenario/calibration/sites/faults inputs that cannot be read or are not valid: missing, a folder,
#: empty, malformed, binary, larger than dispersal._io.MAX_INPUT_BYTES, a FIFO, a device that never
#: ends, nested past the parser's recursion limit, under a file, a name too long (issue 35).
BAD_IN_FILES = (
    "{MISSING}",
    "{DIR}",
    "{DIRTOML}",
    "",
    "{BADTOML}",
    "{BINTOML}",
    "{HUGE}",
    "{FIFO}",
    "/dev/zero",
    "{DEEP}",
    "{FILE}/x.toml",
    "{LONGNAME}",
)
#: The inputs above that a read without a bound or a type check would never finish.
UNBOUNDED = ("{FIFO}", "/dev/zero")
#: Scenario files with wrong types or out-of-range values (token: the offending key).
BAD_SCENARIOS = (
    ("{WRONGTYPE}", "num_nodes"),
    ("{LISTTYPE}", "num_nodes"),
    ("{HUGEINT}", "num_nodes"),
    ("{UNKNOWNKEY}", "num_nodez"),
    ("{NESTED}", "latency_s"),
    ("{BOOLPARAMS}", "params"),
    ("{NANBW}", "bandwidth_up_bits_per_s"),
    # [[site]] / [[churn]] tables (issue 22): the error names the table's path.
    ("{SITEBW}", "site[2].bandwidth_down_bits_per_s"),
    ("{SITEKEY}", "site[0].speed"),
    ("{SITENODES}", "site[0].nodes"),
    ("{SITEHW}", "site[0].hardware"),
    ("{CHURNSITE}", "churn[0].site"),
    ("{CHURNNEG}", "churn[0].nodes"),
)
BAD_SETS = (
    ("nokey", "set"),
    ("=5", "set"),
    ("=", "set"),
    ("", "set"),
    ("num_nodez=4", "num_nodez"),
    ("num_nodes=abc", "num_nodes"),
    ("num_nodes=-1", "num_nodes"),
    ("num_nodes=nan", "num_nodes"),
    ("num_nodes=1.5", "num_nodes"),
    ("num_nodes=99999999999999999999999", "num_nodes"),
    ("latency_s=abc", "latency_s"),
    ("latency_s=-5ms", "latency_s"),
    ("bandwidth_up_bits_per_s=1e400", "bandwidth_up_bits_per_s"),
    ("bandwidth_up_bits_per_s=0", "bandwidth_up_bits_per_s"),
    ("params=inf", "params"),
    ("params=", "params"),
    ("hardware=nope", "hardware"),
    ("algorithm=nope", "algorithm"),
    ("mfu=2", "mfu"),
    ("duration_s=0", "duration_s"),
)

#: The scenario shortcut flags and the bad values each must reject (token = flag name).
SCENARIO_FLAGS: dict[str, tuple[str, ...]] = {
    "--hardware": BAD_ENUM,
    "--nodes": ("-1", "0", "99999999999999999999999", "", "abc", "1.5", "nan"),
    "--bandwidth": (*BAD_UNITS, *BAD_POSITIVE),
    "--latency": BAD_DURATIONS,
    "--distance": ("-5km", "5 parsecs", "", "nan", "1e400km"),
    "--days": BAD_POSITIVE,
    "--params": ("-1", "0", "", "abc", "1e400", "5 apples", "inf"),
    "--tokens": ("-1", "0", "", "abc", "1e400", "inf"),
    "--algorithm": BAD_ENUM,
}


def _flag_cases(cmd: list[str], flags: dict[str, tuple[str, ...]]) -> Iterator[Case]:
    for flag, values in flags.items():
        for v in values:
            yield [*cmd, flag, v], flag.lstrip("-")


def _scenario_cases(cmd: list[str], positional: bool = False) -> Iterator[Case]:
    """Bad --scenario files, bad --set pairs and bad shortcut flags for a scenario command."""
    opt = [] if positional else ["--scenario"]
    for p in BAD_IN_FILES:
        yield [*cmd[:1], *opt, p, *cmd[1:]], ("scenario" if p == "" else p)
    for p, token in BAD_SCENARIOS:
        yield [*cmd[:1], *opt, p, *cmd[1:]], token
    base = [*cmd[:1], "paper_threat_model", *cmd[1:]] if positional else cmd
    for pair, token in BAD_SETS:
        yield [*base, "--set", pair], token
    for v in BAD_ENUM:
        yield [*base, "--mode", v], "mode"


def estimate_cases() -> Iterator[Case]:
    yield from _scenario_cases(["estimate"])
    yield from _flag_cases(["estimate"], SCENARIO_FLAGS)
    yield ["estimate", "--latency", "10ms", "--distance", "100km"], "latency"
    yield from _flag_cases(["estimate"], {"--regime": BAD_ENUM})
    for p in BAD_OUT_FILES:
        yield ["estimate", "--out", p], ("out" if p == "" else p)
    yield ["estimate", "--out", "/dev/full"], "/dev/full"  # ENOSPC names the path (issue 35)
    for p in BAD_IN_FILES:
        yield ["estimate", "--calibration", p], ("calibration" if p == "" else p)


def plan_cases() -> Iterator[Case]:
    flags: dict[str, tuple[str, ...]] = {
        "--target": BAD_TARGETS,
        "--metric": BAD_ENUM,
        "--regime": BAD_ENUM,
        "--bandwidth": (*BAD_UNITS, *BAD_POSITIVE),
        "--latency": BAD_DURATIONS,
        "--distance": ("-5km", "5 parsecs", "", "nan"),
        "--max-days": BAD_POSITIVE,
        "--hardware": BAD_ENUM,
        "--max-nodes": ("-1", "0", "99999999999999999999999", "", "abc"),
        "--compression": BAD_POSITIVE,
        "--mfu": (*BAD_POSITIVE, "2"),
        "--straggler": BAD_ENUM,
        "--max-cost": ("nan", "-1", "abc", "", "1e400", "$-5M"),
        "--objective": BAD_ENUM,
        "--search": BAD_ENUM,
        "--mode": BAD_ENUM,
        "--samples": ("-1", "abc", "99999999999999999999999", ""),
        "--seed": ("-1", "abc", "99999999999999999999999", ""),
    }
    yield from _flag_cases(["plan", "--target", "1e24"], {"--target": BAD_TARGETS})
    yield from _flag_cases(
        ["plan", "--target", "1e24", "--no-baseline"], {k: v for k, v in flags.items() if k != "--target"}
    )
    for p in BAD_IN_FILES:
        yield ["plan", "--target", "1e24", "--calibration", p], ("calibration" if p == "" else p)
    # plan --sites (issue 22): a fleet of site types from a scenario file with [[site]] tables.
    for p in BAD_IN_FILES:
        yield ["plan", "--target", "1e24", "--sites", p], ("sites" if p == "" else p)
    yield ["plan", "--target", "1e24", "--sites", "{SITEBW}"], "site[2].bandwidth_down_bits_per_s"
    yield ["plan", "--target", "1e24", "--sites", "{NANBW}"], "bandwidth_up_bits_per_s"
    yield ["plan", "--target", "1e24", "--sites", "{SITEKEY}", "--metric", "nope"], "metric"


def solve_cases() -> Iterator[Case]:
    base = ["solve", "--for", "bandwidth", "--where", "utilisation=0.9"]
    yield from _scenario_cases(base)
    yield from _flag_cases(["solve", "--where", "utilisation=0.9"], {"--for": ("nope", "", "bandwidthx")})
    yield from _flag_cases(
        ["solve", "--for", "bandwidth"],
        {"--where": ("nope", "", "utilisation=abc", "utilisation=nan", "nothing=5", "=5", "utilisation=")},
    )
    yield from _flag_cases(
        base,
        {"--range": ("abc", "1Mbps", "1:2:3", "xMbps:1Gbps", "1Gbps:nan", "-5Mbps:1Gbps", "10Gbps:1Mbps")},
    )
    yield from _flag_cases(["solve", "--for", "bandwidth", "--where", "premium=2"], {"--target": BAD_TARGETS})
    yield [*base, "--plan-hardware", "h100_sxm"], "plan_hardware"


def sweep_cases() -> Iterator[Case]:
    yield from _flag_cases(
        ["sweep", "--no-plot"],
        {
            "--x": ("nope", "", "target=", "foo=1,2", "target=abc", "target=nan,1e24", "bandwidth=-5Mbps"),
            "--y": ("nope", "", "regime=nope", "target=1e24", "max_days=abc", "mfu=nan", "sites=abc"),
            "--mode": BAD_ENUM,
            "--search": BAD_ENUM,
            "--metric": BAD_ENUM,
            "--regime": BAD_ENUM,
        },
    )
    for p in BAD_OUT_FILES:
        p = p.replace(".json", ".csv")
        yield ["sweep", "--no-plot", "--out", p], ("out" if p == "" else p)
    yield ["sweep", "--no-plot", "--out", "{DIR}/x.txt"], "out"
    for p in BAD_OUT_FILES:
        p = p.replace(".json", ".png")
        yield ["sweep", "--out", "{DIR}/s.csv", "--plot", p], ("plot" if p == "" else p)
    field = ["sweep", "--no-plot", "--field", "utilisation", "--x", "num_nodes=2,4", "--y", "latency_s=0.1"]
    for p in BAD_IN_FILES:
        yield [*field, "--scenario", p], ("scenario" if p == "" else p)
    yield from _flag_cases(
        ["sweep", "--no-plot", "--field", "utilisation", "--y", "latency_s=0.1"],
        {"--x": ("num_nodes=abc", "num_nodes=-1", "nope=1", "num_nodes=nan")},
    )
    yield from _flag_cases(
        ["sweep", "--no-plot", "--x", "num_nodes=2", "--y", "latency_s=0.1"],
        {"--field": ("nope", "", "scenario", "traffic.nope")},
    )


def counter_cases() -> Iterator[Case]:
    yield from _flag_cases(
        ["counter", "--lever", "hbm"],
        {
            "--target": BAD_TARGETS,
            "--mode": BAD_ENUM,
            "--regime": BAD_ENUM,
            "--bandwidth": (*BAD_UNITS, *BAD_POSITIVE),
            "--latency": BAD_DURATIONS,
            "--days": BAD_POSITIVE,
            "--metric": BAD_ENUM,
            "--search": BAD_ENUM,
            "--detection": ("nope", "nope=1", "=1", ""),
        },
    )
    yield from _flag_cases(["counter"], {"--lever": BAD_ENUM, "--bundle": ("nope", "+", "", "hbm+nope")})
    for p in BAD_OUT_FILES:
        p = p.replace(".json", ".png")
        yield ["counter", "--lever", "hbm", "--plot", p], ("plot" if p == "" else p)
    for p in BAD_IN_FILES:
        yield ["counter", "--lever", "hbm", "--calibration", p], ("calibration" if p == "" else p)


def tornado_cases() -> Iterator[Case]:
    yield from _flag_cases(
        ["tornado"],
        {
            "--target": BAD_TARGETS,
            "--mode": BAD_ENUM,
            "--regime": BAD_ENUM,
            "--bandwidth": (*BAD_UNITS, *BAD_POSITIVE),
            "--latency": BAD_DURATIONS,
            "--days": BAD_POSITIVE,
            "--hardware": ("nope", "h100_sxm,nope", ","),
        },
    )
    for p in BAD_OUT_FILES:
        p = p.replace(".json", ".png")
        yield ["tornado", "--plot", p], ("plot" if p == "" else p)


def resilience_cases() -> Iterator[Case]:
    yield from _flag_cases(
        ["resilience"],
        {
            "--chips": ("nan", "inf", "-1", "0", "1e400", "", "abc", "1.5", "1e30"),
            "--mtbf": ("nan", "-1h", "0", "abc", "1e400h", "5 parsecs"),
            "--sites": ("-1", "0", "abc", "", "99999999999999999999999"),
            "--chips-per-island": ("-1", "0", "abc", "99999999999999999999999"),
            "--chips-per-node": ("-1", "0", "abc", "99999999999999999999999"),
            "--restart": BAD_DURATIONS,
            "--round-time": (*BAD_DURATIONS, "0"),
            "--lose-sites": ("-1", "abc", "9", "99999999999999999999999"),
            "--lose-at": BAD_DURATIONS,
            "--down-for": ("-1d", "abc", "nan", "", "1e400d"),
            "--days": BAD_POSITIVE,
            "--replications": ("-1", "0", "abc", "99999999999999999999999"),
            "--seed": ("-1", "abc", "99999999999999999999999"),
        },
    )
    for p in BAD_OUT_FILES:
        p = p.replace(".json", ".png")
        yield ["resilience", "--plot", p], ("plot" if p == "" else p)


def reproduce_cases() -> Iterator[Case]:
    for p in BAD_OUT_DIRS:
        yield ["reproduce", "--out", p], ("out" if p == "" else p)


def validate_cases() -> Iterator[Case]:
    for p in BAD_OUT_DIRS:
        yield ["validate", "--out", p], ("out" if p == "" else p)
    yield ["validate", "--case", "nope"], "case"
    yield ["validate", "--case", ""], "case"


def fields_cases() -> Iterator[Case]:
    yield ["fields", "nope"], "nope"
    yield ["fields", ""], "field"
    yield ["fields", "num_nodes", "nope"], "nope"


def report_cases() -> Iterator[Case]:
    for p in BAD_IN_FILES:
        yield ["report", p], ("scenario" if p == "" else p)
    for p, token in BAD_SCENARIOS:
        yield ["report", p], token
    for pair, token in BAD_SETS:
        yield ["report", "paper_threat_model", "--set", pair], token
    for v in BAD_ENUM:
        yield ["report", "paper_threat_model", "--mode", v], "mode"
    for p in BAD_OUT_FILES:
        p = p.replace(".json", ".html")
        yield ["report", "paper_threat_model", "--out", p], ("out" if p == "" else p)
    # issue 24: the options shared with the app's report (plan, countermeasures, uncertainty, resilience)
    yield from _flag_cases(
        ["report", "paper_threat_model", "--mode", "paper"],
        {
            "--target": BAD_TARGETS,
            "--uncertainty": ("-1", "abc", "1e400", "", "1.5"),
            "--seed": ("-1", "abc", ""),
            "--plan-regime": BAD_ENUM,
            "--metric": BAD_ENUM,
            "--objective": BAD_ENUM,
            "--search": BAD_ENUM,
            "--links": BAD_ENUM,
            "--convention": BAD_ENUM,
            "--lose-sites": ("-1", "abc", "", "1.5"),
            "--lose-at": BAD_NUMBERS,
            "--down-for": BAD_POSITIVE,
            "--run-days": BAD_POSITIVE,
            "--mtbf": BAD_POSITIVE,
            "--restart": BAD_NUMBERS,
            "--max-chips": (*BAD_POSITIVE, "1e30"),
        },
    )


def tail_grid_cases() -> Iterator[Case]:
    base = ["tail-grid", "--dry-run", "--results", "{DIR}/tail.jsonl"]
    yield from _flag_cases(
        base,
        {
            "--replicas": ("0", "abc", "", "5000", "-1"),
            "--budgets": ("10", "abc", ","),
            "--batches": ("0", "1.5"),
            "--inner-steps": ("0", "x"),
            "--seeds": ("-1", "abc", ""),
            "--model": ("huge",),
            "--device": ("tpu",),
            "--jobs": ("0", "abc"),
            "--m-x": ("0", "abc"),
            "--bootstrap": ("-1",),
        },
    )
    for p in BAD_OUT_FILES:
        p = p.replace(".json", ".jsonl")
        yield ["tail-grid", "--dry-run", "--results", p], ("results" if p == "" else p)
    yield ["tail-grid", "--dry-run", "--results", "{DIR}/tail.csv"], "results"
    yield ["tail-grid", "--analyse-only", "--results", "{DIR}/none.jsonl"], "results"


def calibrate_cases() -> Iterator[Case]:
    base = ["calibrate", "--dry-run", "--out", "{DIR}/cal"]
    yield from _flag_cases(
        base,
        {
            "--budget-minutes": BAD_POSITIVE,
            "--steps": ("-1", "0", "abc", "99999999999999999999999", "499"),
            "--global-batch": ("-1", "0", "abc", "7"),
            "--sizes": ("nope", "", ","),
            "--seeds": ("abc", "", "1.5"),
            "--jobs": ("-1", "0", "abc"),
            "--bootstrap": ("-1", "abc"),
        },
    )
    for p in BAD_OUT_DIRS:
        yield ["calibrate", "--dry-run", "--out", p], ("out" if p == "" else p)
    for opt in ("--toml", "--bench"):
        for p in BAD_OUT_FILES:
            p = p.replace(".json", ".toml" if opt == "--toml" else ".md")
            yield [*base, opt, p], (opt.lstrip("-") if p == "" else p)
    for p in BAD_OUT_DIRS:
        yield [*base, "--docs", p], ("docs" if p == "" else p)


def app_cases() -> Iterator[Case]:
    yield from _flag_cases(
        ["app"],
        {
            "--host": ("", "notahost.invalid", "999.1.1.1", "-", "a b", "1.2.3.4"),
            "--port": ("0", "-1", "65536", "abc", "", "99999999999999999999999"),
        },
    )


def frontier_cases() -> Iterator[Case]:
    yield from _flag_cases(
        ["frontier", "--target", "1e24", "--premium", "2", "--samples", "0"],
        {
            # a comma separates targets here ("1,5" is two targets), so that case is not bad input
            "--target": tuple(t for t in BAD_TARGETS if t != "1,5"),
            "--premium": ("nan", "inf", "-1", "0", "0.5", "", "abc", "1e400"),
            "--regime": BAD_ENUM,
            "--mode": BAD_ENUM,
            "--samples": ("-1", "abc", "99999999999999999999999", ""),
            "--seed": ("-1", "abc", "99999999999999999999999", ""),
            "--sites": ("0", "-1", "1.5", "abc", "", "1e400", "100001", "nan"),
            "--bandwidth": BAD_UNITS,
            "--plot": (*BAD_OUT_FILES, "frontier.txt"),
            "--max-site-kw": ("0", "-1", "nan", "inf", "abc", "", "1e400"),
        },
    )


def site_pipeline_cases() -> Iterator[Case]:
    """Bad site-pipeline inputs (issue 22 item 2): plan's --site-nodes and the new scenario fields."""
    yield from _flag_cases(
        ["plan", "--target", "1e24", "--no-baseline"], {"--site-nodes": ("0", "1", "-3", "abc", "", "99999")}
    )
    for pair in (
        "nodes_per_site=0",
        "nodes_per_site=abc",
        "site_fabric_bits_per_s=-1Gbps",
        "site_fabric_latency_s=-1ms",
    ):
        yield ["estimate", "--set", pair], pair.split("=")[0]


def train_cases() -> Iterator[Case]:
    """`dispersal train --algorithm decoupled`'s flags (issue 22): refused before any process starts."""
    dc = ["train", "--algorithm", "decoupled", "--workers", "3", "--steps", "20", "-H", "10"]
    for v in BAD_ENUM:
        yield [*dc, "--merge", v], "merge"
    yield ["train", "--merge", "norm_preserving"], "merge"  # the syncer's rule, not diloco's
    for v in ("-1", "4", "99999999999999999999999", "abc", "", "1.5", "nan"):
        yield [*dc, "--quorum", v], "quorum"
    for v in BAD_POSITIVE:
        yield [*dc, "--sync-deadline", v], "sync-deadline"
    yield [*dc, "--sync-deadline", "3601"], "sync-deadline"
    yield [*dc, "--fragments", "3"], "fragments"  # Streaming DiLoCo's, never silently ignored
    for v in ("-1", "1001", "abc", "", "2.5"):
        yield [*dc, "--max-staleness", v], "max-staleness"
    yield [*dc, "--link-mode", "real"], "link-mode"
    yield [*dc, "--resume"], "resume"
    yield [*dc, "--kill", "w1@step10/allgather"], "fault"
    yield [*dc, "--checkpoint-every", "1"], "checkpoint-every"
    # issue 35: bad --faults files and --out folders, a rejoin with no kill before it
    for p in BAD_IN_FILES:
        yield ["train", "--faults", p], ("faults" if p == "" else p)
    for p in BAD_OUT_DIRS:
        yield ["train", "--out", p], ("out" if p == "" else p)
    yield ["train", "--rejoin", "w1@step5"], "rejoin"
    yield ["train", "--kill", "w1@step9", "--rejoin", "w1@step5"], "rejoin"
    yield ["train", "--kill", "w2@step3", "--rejoin", "w1@step5"], "rejoin"
    yield ["train", "--kill", "w1@step3", "--rejoin", "w1@step5", "--rejoin", "w1@step8"], "rejoin"
    yield ["train", "--report", ""], "report"


def frontier_time_cases() -> Iterator[Case]:
    """`frontier --year` and `frontier --compare` (cli/frontier_time.py)."""
    yield from _flag_cases(
        ["frontier", "--year"],
        {
            "--until": ("1999", "2101", "abc", "", "-1", "99999999999999999999999"),
            "--target": ("1e24,1e25", *(t for t in BAD_TARGETS if t != "1,5")),
            "--premium": ("nan", "0.5", "abc"),
        },
    )
    for p in BAD_OUT_FILES:
        yield ["frontier", "--year", "--plot", p], "plot"
    yield ["frontier", "--year", "--plot", "{DIR}/x.json"], "plot"
    yield ["frontier", "--year", "--compare"], "compare"
    yield from _flag_cases(
        ["frontier", "--compare"],
        {
            "--wan": (*BAD_UNITS, "0", "", "abc"),
            "--lose-sites": ("-1", "abc", "99999999999999999999999", ""),
            "--premium": ("1,2", "0.5", "nan"),
            "--target": tuple(t for t in BAD_TARGETS if t != "1,5"),
            "--days": ("0", "-1", "nan", "inf", "abc", "", "99999999999999999999999"),
            "--latency": ("-1ms", "5parsec", "abc", "", "1e30s"),
        },
    )
    yield ["frontier", "--days", "30"], "days"  # read only with --compare


GROUPS = {
    "estimate": estimate_cases,
    "plan": plan_cases,
    "solve": solve_cases,
    "sweep": sweep_cases,
    "counter": counter_cases,
    "tornado": tornado_cases,
    "resilience": resilience_cases,
    "reproduce": reproduce_cases,
    "validate": validate_cases,
    "fields": fields_cases,
    "report": report_cases,
    "calibrate": calibrate_cases,
    "tail_grid": tail_grid_cases,
    "app": app_cases,
    "frontier": frontier_cases,
    "decoupled": lambda: decoupled_cases(),
    "site_pipeline": site_pipeline_cases,
    "train": train_cases,
    "frontier_time": frontier_time_cases,
}


def decoupled_cases() -> Iterator[Case]:
    """Decoupled DiLoCo's scenario fields and `plan --algorithms`."""
    for pair, token in (
        ("quorum_fraction=0", "quorum_fraction"),
        ("quorum_fraction=1.5", "quorum_fraction"),
        ("quorum_fraction=abc", "quorum_fraction"),
        ("merge_rule=median", "merge_rule"),
        ("syncer=moon", "syncer"),
    ):
        yield ["estimate", "--set", "algorithm=decoupled", "--set", pair], token
    for v in ("foo", "auto,foo", ",", "Decoupled"):
        yield ["plan", "--target", "1e24", "--no-baseline", "--algorithms", v], "algorithms"


def all_cases() -> list[Case]:
    """Every bad input of every command (duplicates removed, order kept)."""
    seen: set[tuple[str, ...]] = set()
    out: list[Case] = []
    for make in GROUPS.values():
        for argv, token in make():
            if tuple(argv) not in seen:
                seen.add(tuple(argv))
                out.append((argv, token))
    return out


def fleet_cases() -> Iterator[Case]:
    """`dispersal fleet` (issue 24 item 7): the scenario part and its own --metric."""
    yield from _scenario_cases(["fleet"])
    yield from _flag_cases(["fleet"], SCENARIO_FLAGS)
    yield ["fleet", "--latency", "10ms", "--distance", "100km"], "latency"
    yield from _flag_cases(["fleet"], {"--regime": BAD_ENUM, "--metric": (*BAD_ENUM, "c_qualityx")})


GROUPS["fleet"] = fleet_cases


def fleet_sites_cases() -> Iterator[Case]:
    """`dispersal fleet` with [[site]] scenarios and the 2026 algorithms' fields (issues 22, 24.7)."""
    yield ["fleet", "--scenario", "intellect1_schedule", "--nodes", "5"], "num_nodes"
    yield ["fleet", "--scenario", "intellect1_schedule", "--set", "site=3"], "site"
    yield ["fleet", "--algorithm", "site_pp_diloco", "--set", "nodes_per_site=0"], "nodes_per_site"
    yield ["fleet", "--algorithm", "decoupled", "--set", "quorum_fraction=1.5"], "quorum_fraction"
    yield ["fleet", "--algorithm", "decoupled", "--set", "merge_rule=median"], "merge_rule"
    yield ["fleet", "--set", "syncer=moon"], "syncer"


GROUPS["fleet_sites"] = fleet_sites_cases
