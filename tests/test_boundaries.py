"""Architecture boundaries: the model is pure (no torch), imports nothing from cli/testbed/app, and its
public API is a reviewed snapshot."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import dispersal.model

MODEL_DIR = Path(dispersal.model.__file__).parent


@pytest.mark.slow
def test_model_imports_and_runs_without_torch() -> None:
    code = textwrap.dedent(
        """
        import importlib.abc, sys

        class BlockTorch(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch is blocked in this test")
                return None

        sys.meta_path.insert(0, BlockTorch())
        import dispersal
        import dispersal.model
        from dispersal.model import Scenario, estimate
        from dispersal.model.kernel import kernel  # noqa: F401
        from dispersal.model.search import planner  # noqa: F401
        e = estimate(Scenario(), mode="paper")
        assert e.feasible, e.reasons
        assert "torch" not in sys.modules, "torch was imported"
        print("ok", dispersal.__version__)
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_model_imports_nothing_from_cli_testbed_or_app() -> None:
    banned = (
        "dispersal.cli",
        "dispersal.testbed",
        "dispersal.app",
        "dispersal.web",
        "dispersal.sim",
        "torch",
        "typer",
        "rich",
        "streamlit",
        "matplotlib",
    )
    files = sorted(MODEL_DIR.rglob("*.py"))
    assert files
    for f in files:
        for mod in _imports(f):
            assert not any(mod == b or mod.startswith(b + ".") for b in banned), f"{f.name} imports {mod}"


def test_model_public_api_snapshot() -> None:
    """Changing the public API is a deliberate act: update this snapshot in the same commit."""
    assert sorted(dispersal.model.__all__) == [
        "Algorithm",
        "Constraints",
        "Cost",
        "DEFAULT_PARAMS",
        "Efficiency",
        "Estimate",
        "InputError",
        "Mode",
        "ModelParams",
        "Plan",
        "PlanOption",
        "Precision",
        "Pricing",
        "Scenario",
        "Solution",
        "TimeBreakdown",
        "Traffic",
        "accelerator",
        "accelerators",
        "estimate",
        "latency_from_distance",
        "max_run_length_s",
        "plan",
        "reference_models",
        "regime",
        "regimes",
        "solve",
    ]
    for name in dispersal.model.__all__:
        assert hasattr(dispersal.model, name), name


def test_top_level_api_snapshot() -> None:
    import dispersal

    assert sorted(dispersal.__all__) == [
        "Algorithm",
        "Constraints",
        "Estimate",
        "InputError",
        "Mode",
        "ModelParams",
        "Plan",
        "PlanOption",
        "Scenario",
        "Solution",
        "__version__",
        "estimate",
        "load_scenario",
        "plan",
        "scenario_names",
        "solve",
    ]
