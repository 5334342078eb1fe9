"""The model's layers import only downward: inputs <- kernel <- sites <- run <- search <- analyses /
checks."""

from __future__ import annotations

import ast
from pathlib import Path

import dispersal.model

MODEL_DIR = Path(dispersal.model.__file__).parent
#: What each layer may import from the model (besides itself).
ALLOWED = {
    "inputs": set(),
    "kernel": {"inputs"},
    "sites": {"inputs", "kernel"},
    "run": {"inputs", "kernel", "sites"},
    "search": {"inputs", "kernel", "sites", "run"},
    "analyses": {"inputs", "kernel", "sites", "run", "search"},
    "checks": {"inputs", "kernel", "sites", "run", "search", "analyses"},
}


def _model_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        out |= {n.split(".")[2] for n in names if n.startswith("dispersal.model.")}
    return out


def test_layers_import_only_downward() -> None:
    assert {p.name for p in MODEL_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(ALLOWED)
    for layer, allowed in ALLOWED.items():
        for f in sorted((MODEL_DIR / layer).rglob("*.py")):
            bad = _model_imports(f) - allowed - {layer}
            assert not bad, f"{f.relative_to(MODEL_DIR)} imports {sorted(bad)}"


def test_no_module_left_at_the_top() -> None:
    assert sorted(p.name for p in MODEL_DIR.glob("*.py")) == ["__init__.py"]
