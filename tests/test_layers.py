"""The model's layers import only downward: inputs <- kernel <- sites <- run <- search <- analyses /
checks."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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


@pytest.mark.slow
def test_layers_import_only_downward() -> None:
    assert {p.name for p in MODEL_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(ALLOWED)
    for layer, allowed in ALLOWED.items():
        for f in sorted((MODEL_DIR / layer).rglob("*.py")):
            bad = _model_imports(f) - allowed - {layer}
            assert not bad, f"{f.relative_to(MODEL_DIR)} imports {sorted(bad)}"


def test_no_module_left_at_the_top() -> None:
    assert sorted(p.name for p in MODEL_DIR.glob("*.py")) == ["__init__.py"]


# --- inside a package: names that cross files are public (issue 36) -----------------------------------

#: Packages whose modules may use no private name (leading underscore) of another module.
PUBLIC_SEAMS = ("analyses/frontier",)


def private_uses(path: Path, package: str = "dispersal") -> list[str]:
    """Where the module at `path` uses a private name of another module of `package`: ``from m
    import _x`` (m under `package`, relative imports included) or ``alias._x`` where ``alias`` was
    bound by importing a module of `package` (``import m as alias``, ``from pkg import module``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[int, int, str]] = []
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(package)):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    where = f"{'.' * node.level}{node.module or ''}"
                    out.append(
                        (node.lineno, node.col_offset, f"line {node.lineno}: from {where} import {a.name}")
                    )
                # `from pkg import module`: the bound name may be a module; its private names count
                aliases.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(package + ".") and a.asname:
                    aliases.add(a.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            out.append((node.lineno, node.col_offset, f"line {node.lineno}: {node.value.id}.{node.attr}"))
    return [text for _, _, text in sorted(out)]


def test_package_modules_use_only_public_names_of_other_modules() -> None:
    for pkg in PUBLIC_SEAMS:
        files = sorted((MODEL_DIR / pkg).rglob("*.py"))
        assert files, pkg
        for f in files:
            bad = private_uses(f)
            assert not bad, f"{f.relative_to(MODEL_DIR)} uses private names of other modules: {bad}"


def test_the_frontier_is_one_package() -> None:
    analyses = MODEL_DIR / "analyses"
    outside = sorted(p.name for p in analyses.glob("frontier*.py"))
    assert outside == [], f"frontier modules outside analyses/frontier/: {outside}"
    assert not (analyses / "frontier" / "extras.py").exists()


def test_private_uses_finds_each_form(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "import dispersal.a.b as b\n"
        "import os\n"
        "from dispersal.a import c, d as e\n"
        "from dispersal.a.f import _g, public, __version__\n"
        "from . import _h\n"
        "from os import _exit\n"
        "x = b._i + c._j + e._k + os._exit + b.ok + c.__name__\n",
        encoding="utf-8",
    )
    assert private_uses(src) == [
        "line 4: from dispersal.a.f import _g",
        "line 5: from . import _h",
        "line 7: b._i",
        "line 7: c._j",
        "line 7: e._k",
    ]
    src.write_text("from dispersal.a import b\nimport os\ny = b.public + os._exit\n", encoding="utf-8")
    assert private_uses(src) == []
