"""`charter machines`: the machines that run your automations; disable and enable them."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from charter.cli import remote, tables, when
from charter.core.jsontypes import JsonObject

app = typer.Typer(help="Machines: list, disable, enable.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
Name = Annotated[str, typer.Argument(help="The machine id (its name).")]


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """Your machines (every machine for a `*` token)."""
    with remote.client() as api:
        machines = [machine.raw for machine in api.machines()]
    if as_json:
        remote.print_json({"machines": list(machines)})
        return
    table = Table(
        "id", "target", "principal", "registered", "status", "last seen", "running",
        title="machines",
    )  # fmt: skip
    for machine in machines:
        disabled = machine.get("disabled_at")
        table.add_row(
            Text(str(machine.get("id"))),
            Text(str(machine.get("target"))),
            Text(str(machine.get("principal"))),
            when.human(machine.get("created_at")),
            f"disabled {when.human(disabled)}" if disabled else "enabled",
            # Proofs are remembered for minutes only: no time means not recently.
            when.human(machine.get("last_seen_at")),
            str(machine.get("runs_in_progress", "-")),
        )
    tables.show(tables.whole(table, "id"))


@app.command("disable")
def disable(name: Name, as_json: JsonFlag = False) -> None:
    """Disable a machine: its requests are refused from now on."""
    with remote.client() as api:
        _done(api.disable_machine(name).raw, "disabled", as_json)


@app.command("enable")
def enable(name: Name, as_json: JsonFlag = False) -> None:
    """Enable a disabled machine again."""
    with remote.client() as api:
        _done(api.enable_machine(name).raw, "enabled", as_json)


def _done(machine: JsonObject, verb: str, as_json: bool) -> None:
    if as_json:
        remote.print_json(machine)
    else:
        typer.echo(f"machine {machine.get('id')} {verb}")
