"""The `charter` entry point: assembles the command groups and turns errors into one line."""

from __future__ import annotations

import importlib
import json
import sys
from importlib import metadata
from typing import Annotated

import typer

from charter.cli import (
    actors,
    archive,
    automations,
    db,
    erasing,
    helptext,
    hints,
    holding,
    keys,
    log,
    machine,
    machines,
    processes,
    runs,
    serve,
    submit,
    timers,
    tokens,
    up,
    verify,
    witness,
    worker,
    workflows,
)
from charter.core.errors import CharterError

app = typer.Typer(
    name="charter",
    help="Charter: governed workflows and automation on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _show_version(asked: bool) -> None:
    if asked:
        typer.echo(f"charter {package_version()}")
        raise typer.Exit()


def package_version() -> str:
    """The installed distribution's version (the package's own when run from a tree)."""
    try:
        return metadata.version("charter")
    except metadata.PackageNotFoundError:
        from charter import __version__

        return __version__


@app.callback()
def _charter(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_show_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Charter: governed workflows and automation on PostgreSQL."""


app.add_typer(db.app, name="db")
app.add_typer(keys.app, name="keys")
app.add_typer(log.app, name="log")
app.add_typer(workflows.app, name="workflows")
app.add_typer(tokens.app, name="tokens")
app.add_typer(actors.app, name="actors")
app.add_typer(automations.app, name="automations")
app.add_typer(runs.app, name="runs")
app.add_typer(machine.app, name="machine")
app.add_typer(machines.app, name="machines")
app.add_typer(processes.app, name="processes")
app.add_typer(witness.app, name="witness")
app.add_typer(archive.app, name="archive")
app.command("up")(up.up)
app.command("serve")(serve.serve)
app.command("verify")(verify.verify)
app.command("export")(verify.export)
app.command("worker")(worker.worker)
app.command("submit")(submit.submit)
app.command("erase")(erasing.erase)
app.command("hold")(holding.hold)
app.command("release")(holding.release)
app.command("show")(processes.show)
app.command("history")(processes.history)
app.command("timers")(timers.timers)


def _click_exceptions() -> tuple[type[Exception], ...]:
    """ClickException as typer really raises it. Recent typer vendors click as
    `typer._click` (its exceptions no longer derive from click's); older typer raises
    click's own. Whichever of the two is importable is caught."""
    found: list[type[Exception]] = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        found.append(module.ClickException)
    return tuple(found)


_CLICK_EXCEPTIONS = _click_exceptions()
# The code of a command line click refuses (a missing, unknown or invalid option), under
# --json; exit 2, as without it.
USAGE_ERROR = "usage_error"


def wants_json(args: list[str]) -> bool:
    """Whether the command line asks for JSON output (`--json` before any `--`)."""
    options = args[: args.index("--")] if "--" in args else args
    return "--json" in options


def main() -> None:
    """Run the CLI; a Charter error prints one clear line and exits 1, a usage error
    prints click's usage line and one `Error:` line and exits 2."""
    try:
        # Without standalone mode click returns a typer.Exit code instead of exiting, and
        # raises usage errors instead of printing them: both are handled here.
        command = helptext.tidy(typer.main.get_command(app))
        code = command.main(prog_name="charter", standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except CharterError as exc:
        after = hints.hint(exc)
        if wants_json(sys.argv[1:]):
            # Under --json a script gets the error as data too: the wire shape, on stderr.
            error = exc.to_dict() | ({"hint": after} if after else {})
            print(json.dumps({"error": error}, default=str, ensure_ascii=False),
                  file=sys.stderr)  # fmt: skip
        else:
            line = " ".join(exc.message.split()) + (f"; {after}" if after else "")
            print(f"error: {line}", file=sys.stderr)
        sys.exit(1)
    except _CLICK_EXCEPTIONS as exc:
        show = getattr(exc, "show", None)
        if wants_json(sys.argv[1:]):
            formatted = getattr(exc, "format_message", None)
            message = str(formatted() if callable(formatted) else exc)
            error = {"code": USAGE_ERROR, "message": " ".join(message.split())}
            print(json.dumps({"error": error}, ensure_ascii=False), file=sys.stderr)
        elif callable(show):
            show()  # usage line, "Try ... --help", "Error: ..." on stderr, as click does
        else:
            print(f"Error: {exc}", file=sys.stderr)
        code = getattr(exc, "exit_code", 2)
        sys.exit(code if isinstance(code, int) else 2)
    except (typer.Abort, KeyboardInterrupt):
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
