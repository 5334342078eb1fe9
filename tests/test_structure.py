"""Structure of src/dispersal: unit sizes and the import graph, measured with `ast` (issue 20).

Limits (the project's standards, "What it must show" of issue 20):

- a function or method: at most 150 lines, counted from its ``def`` line to its last line (decorators
  excluded; docstring, comments and blank lines inside included; a nested function counts in its own
  right and inside its parent);
- a class: at most 400 lines (``class`` line to last line), unless it only declares fields. A class
  is **field-only** when every statement of its body is one of: a string literal (the class docstring
  or an attribute docstring), an annotated assignment (``name: type`` or ``name: type = default``,
  e.g. a dataclass field), ``pass`` / ``...``, or a trivial property: a method decorated with exactly
  ``@property`` whose body is an optional docstring and one ``return`` statement. Any other method
  (``__post_init__``, validation, ``to_dict``), nested class or plain assignment makes it a normal class;
- a file: at most 700 lines (``len(text.splitlines())``);
- no import cycle among the modules of src/dispersal. An edge A -> B is any ``import`` / ``from ...
  import`` in A (at any depth: a function-level import is still a dependency) naming module B, except
  imports under ``if TYPE_CHECKING:`` (never run). ``from pkg import name`` is an edge to the submodule
  ``pkg.name`` when that module exists, else to ``pkg`` (its ``__init__``); importing a submodule adds
  no edge to its parent package.

Since the issue 20 refactors every limit holds and there is no cycle: each check is a plain test, and
the known-offender lists below are empty (a unit that must exceed a limit would be listed there with
its size, and `test_no_offender_is_new_or_larger` would stop it growing). ``python
tests/test_structure.py`` prints any offender as a table.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "dispersal"
MAX_FUNCTION_LINES = 150
MAX_CLASS_LINES = 400
MAX_FILE_LINES = 700

# Allowed offenders (path under src/dispersal, qualified name, lines): none since the issue 20 refactors
# (at their start: kernel._evaluate 541 lines, Worker 813, uncertainty.py 1,158, one testbed cycle).
KNOWN_FUNCTIONS: dict[tuple[str, str], int] = {}
KNOWN_CLASSES: dict[tuple[str, str], int] = {}
KNOWN_FILES: dict[str, int] = {}
KNOWN_CYCLES: list[tuple[str, ...]] = []


@dataclass(frozen=True, slots=True)
class Unit:
    """One measured unit: file (under src/dispersal), qualified name ('' for a file), kind, lines."""

    path: str
    name: str
    kind: str
    lines: int


@cache
def _parse(p: Path) -> ast.Module:
    return ast.parse(p.read_text(encoding="utf-8"), filename=str(p))


def _files(package: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)


def _rel(p: Path) -> str:
    return p.relative_to(PACKAGE).as_posix()


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _is_trivial_property(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.FunctionDef):
        return False
    decorated = [d for d in stmt.decorator_list if isinstance(d, ast.Name) and d.id == "property"]
    if len(decorated) != 1 or len(stmt.decorator_list) != 1:
        return False
    body = stmt.body[1:] if stmt.body and _is_docstring(stmt.body[0]) else stmt.body
    return len(body) == 1 and isinstance(body[0], ast.Return)


def is_field_only(cls: ast.ClassDef) -> bool:
    """True when the class only declares fields (module docstring's definition)."""
    for stmt in cls.body:
        if _is_docstring(stmt) or isinstance(stmt, ast.AnnAssign | ast.Pass) or _is_trivial_property(stmt):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and stmt.value.value is ...:
            continue
        return False
    return True


def _children(stmt: ast.stmt) -> Iterator[ast.stmt]:
    """The statements nested directly in a statement (bodies, else, finally, except and match arms)."""
    for name in ("body", "orelse", "finalbody"):
        yield from getattr(stmt, name, [])
    for h in getattr(stmt, "handlers", []):
        yield from h.body
    for c in getattr(stmt, "cases", []):
        yield from c.body


def _walk(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, ast.stmt]]:
    """(qualified name, node) of every function and class, at any depth (statements only: a lambda
    is not a unit)."""
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            q = f"{prefix}{stmt.name}"
            yield q, stmt
            yield from _walk(stmt.body, f"{q}.")
        else:
            yield from _walk(list(_children(stmt)), prefix)


def measure() -> list[Unit]:
    """Every file, class and function of src/dispersal with its length in lines."""
    out: list[Unit] = []
    for f in _files():
        text = f.read_text(encoding="utf-8")
        rel = _rel(f)
        out.append(Unit(rel, "", "file", len(text.splitlines())))
        for q, node in _walk(_parse(f).body, ""):
            assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            n = (node.end_lineno or node.lineno) - node.lineno + 1
            if isinstance(node, ast.ClassDef):
                out.append(Unit(rel, q, "field-only class" if is_field_only(node) else "class", n))
            else:
                out.append(Unit(rel, q, "function", n))
    return out


def offenders(units: list[Unit]) -> list[Unit]:
    """Units over their limit (field-only classes exempt), largest first within each kind."""
    limit = {"function": MAX_FUNCTION_LINES, "class": MAX_CLASS_LINES, "file": MAX_FILE_LINES}
    bad = [u for u in units if u.kind in limit and u.lines > limit[u.kind]]
    return sorted(bad, key=lambda u: (u.kind, -u.lines))


# --- imports -----------------------------------------------------------------------------------------


def _module_name(p: Path, src: Path = SRC) -> str:
    parts = list(p.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement at any depth, except the body of `if TYPE_CHECKING:` (its else runs)."""
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            yield stmt
        elif isinstance(stmt, ast.If):
            t = stmt.test
            name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else ""
            if name != "TYPE_CHECKING":
                yield from _imports(stmt.body)
            yield from _imports(stmt.orelse)
        else:
            yield from _imports(list(_children(stmt)))


def import_graph(src: Path = SRC, package: str = "dispersal") -> dict[str, set[str]]:
    """Module -> the modules of `package` (under `src`) it imports (rules in the module docstring)."""
    files = {_module_name(f, src): f for f in _files(src / package)}
    packages = {m for m, f in files.items() if f.name == "__init__.py"}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, f in files.items():
        pkg = mod if mod in packages else mod.rpartition(".")[0]
        for node in _imports(_parse(f).body):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")
                    up = up[: len(up) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in files else base)
            for t in targets:
                # `import dispersal.x.y` binds the top package but depends on x.y: keep the longest
                # existing module prefix.
                while t and t not in files:
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[tuple[str, ...]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(tuple(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def table(units: list[Unit], cyc: list[tuple[str, ...]]) -> str:
    """The offenders as a plain-text table, then the cycles."""
    rows = [f"{'kind':<9} {'lines':>6} {'limit':>5}  unit"]
    limit = {"function": MAX_FUNCTION_LINES, "class": MAX_CLASS_LINES, "file": MAX_FILE_LINES}
    for u in units:
        rows.append(
            f"{u.kind:<9} {u.lines:>6} {limit[u.kind]:>5}  src/dispersal/{u.path}{'::' + u.name if u.name else ''}"
        )
    rows += [f"cycle     {len(c):>6}     -  {' <-> '.join(c)}" for c in cyc]
    return "\n".join(rows)


UNITS = measure()
OFFENDERS = offenders(UNITS)
GRAPH = import_graph()
CYCLES = cycles(GRAPH)
# Free the syntax trees: millions of objects that pytest's end-of-session gc.collect would walk (~2 s).
_parse.cache_clear()


def _names(kind: str) -> str:
    return ", ".join(
        f"{u.path}{'::' + u.name if u.name else ''} ({u.lines})" for u in OFFENDERS if u.kind == kind
    )


def _check(kind: str) -> None:
    print("\n" + table(OFFENDERS, CYCLES))
    bad = [u for u in OFFENDERS if u.kind == kind]
    assert not bad, f"{len(bad)} {kind}s over the limit:\n" + table(bad, [])


def test_functions_at_most_150_lines() -> None:
    _check("function")


def test_classes_at_most_400_lines_unless_field_only() -> None:
    _check("class")


def test_files_at_most_700_lines() -> None:
    _check("file")


def test_no_import_cycle() -> None:
    print("\n" + table([], CYCLES))
    assert not CYCLES, "import cycles among src/dispersal modules:\n" + table([], CYCLES)


def test_no_offender_is_new_or_larger() -> None:
    grown: list[str] = []
    for u in OFFENDERS:
        if u.kind == "file":
            allowed = KNOWN_FILES.get(u.path)
        elif u.kind == "class":
            allowed = KNOWN_CLASSES.get((u.path, u.name))
        else:
            allowed = KNOWN_FUNCTIONS.get((u.path, u.name))
        if allowed is None:
            grown.append(f"new {u.kind} over the limit: {u.path}::{u.name} ({u.lines} lines)")
        elif u.lines > allowed:
            grown.append(f"{u.kind} grew: {u.path}::{u.name} {allowed} -> {u.lines} lines")
    new_cycles = [c for c in CYCLES if not any(set(c) <= set(k) for k in KNOWN_CYCLES)]
    grown += [f"new import cycle: {' <-> '.join(c)}" for c in new_cycles]
    assert not grown, "\n".join(grown)


# --- the measuring itself ------------------------------------------------------------------------------


def test_field_only_exemption_is_exactly_the_documented_one() -> None:
    def cls(src: str) -> ast.ClassDef:
        node = ast.parse(src).body[0]
        assert isinstance(node, ast.ClassDef)
        return node

    assert is_field_only(cls('class A:\n    """Doc."""\n    x: int\n    """x doc"""\n    y: float = 1.0\n'))
    assert is_field_only(
        cls("class A:\n    x: int\n    @property\n    def d(self) -> int:\n        return 2 * self.x\n")
    )
    assert is_field_only(cls("class A:\n    pass\n"))
    assert not is_field_only(
        cls("class A:\n    x: int\n    def __post_init__(self) -> None:\n        pass\n")
    )
    assert not is_field_only(cls("class A:\n    x = 1\n"))
    assert not is_field_only(
        cls("class A:\n    @property\n    def d(self) -> int:\n        y = 1\n        return y\n")
    )
    assert not is_field_only(cls("class A:\n    @staticmethod\n    def d() -> int:\n        return 1\n"))
    assert not is_field_only(cls("class A:\n    class B:\n        x: int\n"))


def test_cycle_finder_and_import_resolution(tmp_path: Path) -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(g) == [("a", "b", "c")]
    assert cycles({"a": {"b"}, "b": set()}) == []
    files = {
        "pkg/__init__.py": "from pkg.a import A\n",
        "pkg/a.py": "from pkg import b\nA = 1\n",
        "pkg/b.py": "def f():\n    from . import c\n",
        "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
        "else:\n    import pkg.sub.e\nimport os\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/e.py": "from ..a import A\nfrom pkg.sub import VALUE\ntry:\n    import pkg.b\nexcept ImportError:\n    pass\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    assert import_graph(tmp_path, "pkg") == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b"},  # `from pkg import b`: the submodule, not pkg/__init__
        "pkg.b": {"pkg.c"},  # function-level, relative
        "pkg.c": {"pkg.sub.e"},  # TYPE_CHECKING left out, its else kept, os not ours
        "pkg.sub": set(),
        "pkg.sub.e": {"pkg.a", "pkg.sub", "pkg.b"},  # `from pkg.sub import VALUE`: the package
    }
    assert cycles(import_graph(tmp_path, "pkg")) == [("pkg.a", "pkg.b", "pkg.c", "pkg.sub.e")]


def test_measure_counts_lines_from_def_to_end() -> None:
    by = {(u.path, u.name): u for u in UNITS}
    assert by[("model/inputs/units.py", "")].lines == len(
        (PACKAGE / "model/inputs/units.py").read_text().splitlines()
    )
    text = (PACKAGE / "_io.py").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("def dumps_json"))
    end = next(i for i in range(start + 1, len(text)) if text[i].startswith("def ")) - 2  # 2 blank lines
    assert by[("_io.py", "dumps_json")].lines == end - start


if __name__ == "__main__":
    print(table(OFFENDERS, CYCLES))
