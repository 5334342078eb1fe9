"""Shipped scenarios (TOML package data under dispersal/data/scenarios)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from dispersal._io import load_toml_text, read_input_text
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.scenario import Scenario

DEFAULT_SCENARIO = "paper_threat_model"


def scenario_names(*, with_sites: bool = True) -> list[str]:
    """Names of the shipped scenarios; with_sites=False leaves out those with ``[[site]]`` tables
    (the app's form has one link per direction and cannot show them)."""
    folder = resources.files("dispersal.data").joinpath("scenarios")
    names = sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))
    if with_sites:
        return names
    return [n for n in names if "site" not in load_scenario_dict(n)]


def load_scenario_dict(name_or_path: str) -> dict[str, Any]:
    """A shipped scenario by name, or a TOML file by path, as a dict (not yet validated)."""
    path = Path(name_or_path)
    if path.suffix == ".toml" and path.exists():
        text = read_input_text(path, "scenario")  # bounded, regular files only, errors name the path
    elif name_or_path in scenario_names():
        text = (
            resources.files("dispersal.data")
            .joinpath("scenarios")
            .joinpath(f"{name_or_path}.toml")
            .read_text("utf-8")
        )
    else:
        raise InputError(
            "scenario",
            f"no scenario file or preset {name_or_path!r} (presets: {', '.join(scenario_names())})",
        )
    return load_toml_text(text, "scenario", name_or_path)


def load_scenario(name_or_path: str = DEFAULT_SCENARIO) -> Scenario:
    """Load and validate a scenario."""
    return Scenario.from_dict(load_scenario_dict(name_or_path))
