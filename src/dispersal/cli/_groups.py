"""Option groups for Typer commands: a set of options declared once, as a frozen dataclass, and taken
by every command that needs it as one typed parameter (issue 36 item 5).

Typer has no option groups of its own. A group here is a frozen keyword-only dataclass whose fields
are ``Annotated[T, typer.Option(...)]`` with a default (an ``Annotated[T, typer.Argument(...)]``
without one is allowed too). A command names the group as one parameter::

    @guarded
    @with_groups
    def estimate_cmd(sc: ScenarioOptions, json_: JsonOpt = False) -> None:
        s = sc.scenario_value()

``with_groups`` rewrites the command's signature (what Typer reads for the options and --help): the
group parameter is replaced, in place, by the dataclass's fields, so each option keeps its name,
type, default and help, and its place in --help. When Typer calls the command, the fields' values
are gathered back into one instance of the dataclass. The option names are the fields' names, so
they must not clash with the command's other parameters or with another group's (checked when the
command is declared).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def _is_group(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def _group_parameters(cls: type) -> list[inspect.Parameter]:
    """The dataclass's fields as keyword-only parameters (resolved Annotated types, defaults)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = inspect.Parameter.empty
        out.append(
            inspect.Parameter(
                f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hints[f.name]
            )
        )
    return out


def with_groups(func: F) -> F:
    """``func`` with each option-group parameter (a dataclass type) expanded into its fields in the
    signature Typer reads, and gathered back into one dataclass instance per call (module doc)."""
    hints = typing.get_type_hints(func, include_extras=True)
    sig = inspect.signature(func)
    params: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, tuple[str, ...]]] = {}
    for p in sig.parameters.values():
        annotation = hints.get(p.name, p.annotation)
        if _is_group(annotation):
            fields = _group_parameters(annotation)
            groups[p.name] = (annotation, tuple(f.name for f in fields))
            params.extend(fields)
        else:
            params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=annotation))
    names = [p.name for p in params]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise TypeError(f"{func.__qualname__}: option group fields clash with other parameters: {clash}")

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        for name, (cls, fields) in groups.items():
            kwargs[name] = cls(**{f: kwargs.pop(f) for f in fields})
        return func(**kwargs)

    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{p.name: p.annotation for p in params},
        "return": hints.get("return", sig.return_annotation),
    }
    return wrapper  # type: ignore[return-value]
