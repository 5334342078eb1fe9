"""`dispersal fields`: every Scenario field with its unit, default, allowed range and help.

The listing is read from each field's one declaration (`dispersal.model.inputs.fields`), the same one that
validates values, parses ``--set key=value`` and builds the app's inputs.
"""

from __future__ import annotations

from typing import Annotated

import typer

from dispersal.cli._common import guarded, print_json
from dispersal.model.inputs.errors import InputError
from dispersal.model.inputs.fields import describe, markdown_table
from dispersal.model.inputs.scenario import SCENARIO_FIELDS


@guarded
def fields_cmd(
    name: Annotated[
        list[str] | None, typer.Argument(help="Only these fields (default: all), e.g. latency_s codec.")
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the fields as a JSON list.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print docs/scenario_fields.md (the reference page).")
    ] = False,
) -> None:
    """List the scenario fields that `--set key=value` and scenario files accept.

    Each row: the field, its label, SI unit, default, allowed values and help. Text values may carry
    units ("100Mbps", "40ms", "91B"). Exit status: 0, or 2 for an unknown field name.
    """
    chosen = SCENARIO_FIELDS
    if name:
        known = {f.name: f for f in SCENARIO_FIELDS}
        for n in name:
            if n not in known:
                raise InputError(n, f"unknown scenario field; known: {', '.join(known)}")
        chosen = tuple(known[n] for n in name)
    if markdown:
        typer.echo(markdown_table(chosen), nl=False)
        return
    rows = [describe(f) for f in chosen]
    if json_:
        print_json(rows)
        return
    from rich.table import Table

    from dispersal.cli._render import console

    t = Table(title="Scenario fields (--set key=value)", show_lines=False)
    for col in ("field", "unit", "default", "allowed", "label"):
        t.add_column(col, overflow="fold")
    for r in rows:
        allowed = r["allowed"] + (" or None" if r["optional"] else "")
        t.add_row(
            r["name"], r["unit"], "None" if r["default"] is None else str(r["default"]), allowed, r["label"]
        )
    console().print(t)


def register(app: typer.Typer) -> None:
    """Add `fields` to the root app."""
    app.command("fields")(fields_cmd)
