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


def _calls(path: Path) -> list[ast.Call]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def test_nothing_is_unpickled_from_disk_or_wire() -> None:
    """Every ``torch.load`` in src, tests and benchmarks passes ``weights_only=True`` (tensors and
    plain containers only), and nothing calls ``pickle.load`` / ``pickle.loads``: a checkpoint or a
    peer's bytes never run code, in the tools that read them back either (a test read them with
    ``weights_only=False`` until 2026-12-05)."""
    root = MODEL_DIR.parents[2]
    bad: list[str] = []
    for folder in ("src", "tests", "benchmarks"):
        for path in sorted((root / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if "torch.load" not in text and "pickle.load" not in text:
                continue  # parse only the files that could call a loader
            for call in _calls(path):
                f = call.func
                name = (
                    f"{f.value.id}.{f.attr}"
                    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                    else ""
                )
                where = f"{path.relative_to(root)}:{call.lineno}"
                if name in ("pickle.load", "pickle.loads"):
                    bad.append(f"{where} {name}")
                if name == "torch.load":
                    kw = {k.arg: k.value for k in call.keywords}
                    v = kw.get("weights_only")
                    if not (isinstance(v, ast.Constant) and v.value is True):
                        bad.append(f"{where} torch.load without weights_only=True")
    assert bad == []
