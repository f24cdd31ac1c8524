"""`charter workflows`: validate definitions locally; deploy, list and show them via the API;
find personal values the stored history holds in clear (`lint-history`, in the database)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from charter.cli import deploying, migrate, remote, tables
from charter.core import ijson
from charter.core.errors import Malformed
from charter.dsl.canonical import version_hash
from charter.dsl.lint import workflow_warnings
from charter.dsl.validate import load_workflow, validate_workflow

app = typer.Typer(help="Workflow definitions (DSL v2).", no_args_is_help=True)
app.command("migrate")(migrate.migrate)
app.command("plan")(deploying.plan)
app.command("deploy")(deploying.deploy)

EXIT_PROBLEMS = 1
EXIT_UNREADABLE = 2


@app.command("validate")
def validate(
    files: Annotated[list[Path], typer.Argument(help="Workflow JSON files to check.")],
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print each file's result, problems and warnings as JSON."),
    ] = False,
) -> None:
    """Report every problem of each file; exit 1 if any has problems, 2 if unreadable."""
    if as_json:
        results = [_validated(path) for path in files]
        typer.echo(json.dumps({"files": results}, indent=2, ensure_ascii=False))
        raise typer.Exit(max((_EXIT[str(r["status"])] for r in results), default=0))
    out, err = Console(), Console(stderr=True)
    table = Table("file", "pointer", "message", title="workflow problems", title_justify="left")
    warnings = Table("file", "pointer", "message", title="workflow warnings", title_justify="left")
    status = 0
    for path in files:
        try:
            doc = ijson.loads(path.read_bytes())
        except OSError as exc:
            err.print(f"{path}: cannot read: {exc.strerror or exc}", markup=False)
            status = max(status, EXIT_UNREADABLE)
            continue
        except Malformed as exc:
            err.print(f"{path}: not I-JSON: {exc.message}", markup=False)
            status = max(status, EXIT_UNREADABLE)
            continue
        problems = validate_workflow(doc)
        for problem in problems:
            # Text, not markup: messages quote patterns such as [A-Za-z0-9].
            table.add_row(Text(str(path)), Text(problem.pointer or "/"), Text(problem.message))
        if problems:
            status = max(status, EXIT_PROBLEMS)
            continue
        for warning in workflow_warnings(load_workflow(doc)):
            warnings.add_row(Text(str(path)), Text(warning.pointer), Text(warning.message))
        out.print(f"{path}: ok (version {version_hash(doc)[:12]})", markup=False)
    if warnings.row_count:
        out.print(warnings)
        out.print(f"{warnings.row_count} warning(s): valid, but look again", markup=False)
    if table.row_count:
        out.print(table)
        out.print(f"{table.row_count} problem(s)", markup=False)
    raise typer.Exit(status)


_EXIT = {"ok": 0, "problems": EXIT_PROBLEMS, "unreadable": EXIT_UNREADABLE}


def _validated(path: Path) -> dict[str, object]:
    """One file's result as data: status ok / problems / unreadable, and what was found."""
    result: dict[str, object] = {"file": str(path)}
    try:
        doc = ijson.loads(path.read_bytes())
    except OSError as exc:
        return result | {"status": "unreadable", "error": f"cannot read: {exc.strerror or exc}"}
    except Malformed as exc:
        return result | {"status": "unreadable", "error": f"not I-JSON: {exc.message}"}
    problems = validate_workflow(doc)
    if problems:
        listed = [{"pointer": p.pointer, "message": p.message} for p in problems]
        return result | {"status": "problems", "problems": listed, "warnings": []}
    warnings = [w.to_dict() for w in workflow_warnings(load_workflow(doc))]
    return result | {
        "status": "ok", "version": version_hash(doc), "problems": [], "warnings": warnings,
    }  # fmt: skip


@app.command("test")
def run_scenarios(
    specs: Annotated[
        list[Path],
        typer.Argument(metavar="SPEC", help="Scenario files (JSON); each names its workflow file."),
    ],
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print a JSON report: each scenario's status, failed step, process, "
            "virtual start and end, events and wall time; or the problems of malformed files.",
        ),
    ] = False,
    database: Annotated[
        str | None,
        typer.Option(
            "--database",
            metavar="URL",
            envvar="CHARTER_TEST_ADMIN_URL",
            help="A PostgreSQL superuser URL: a scratch database is created on that server, "
            "migrated, and dropped afterwards (also on failure or Ctrl-C). Default: a "
            "throwaway embedded PostgreSQL in a temporary directory.",
        ),
    ] = None,
) -> None:
    """Run scenario files against the real engine and automation worker, in virtual time.

    A scenario file names a workflow file (relative to itself), a start time, actors with
    their roles and steps: "act" (an actor signs an action; "expect_error" names the code
    it must be refused with), "advance" (move the clock by a duration such as 48h; every
    timer due on the way fires at its own time) and "expect" (state, data as a subset,
    timers, queue, events, last_error). After every step the automation worker fires
    whatever is due, as the automation actor. docs/testing.md describes every key.

    All files run in one scratch database, each with processes of its own. Prints PASS or
    FAIL (with the step, from 1, and what was expected and found) per file and a count.
    Exit 0 when every scenario passes, 1 when one fails, 2 when a file is malformed (an
    unknown key, a wrong type, an unknown actor: each problem with the file and its JSON
    pointer), in which case nothing runs.
    """
    from charter.cli import scenarios  # the engine and the worker only for this command

    raise typer.Exit(scenarios.run(specs, as_json=as_json, admin_url=database))


JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """Every deployed path with its current revision and version."""
    with remote.client() as api:
        workflows = [deployment.raw for deployment in api.workflows()]
    if as_json:
        remote.print_json({"workflows": list(workflows)})
        return
    table = Table()
    # Paths stay whole (they are what `show` takes); the other columns give way.
    width = max((len(str(item["path"])) for item in workflows), default=4)
    table.add_column("path", no_wrap=True, min_width=width)
    for header in ("revision", "version", "deployed at", "by"):
        table.add_column(header)
    for item in workflows:
        table.add_row(
            Text(str(item["path"])),
            str(item["revision"]),
            remote.short(item["version"]),
            str(item["deployed_at"]),
            Text(str(item.get("deployed_by") or "")),
        )
    Console().print(table)


@app.command("show")
def show(
    path: Annotated[str, typer.Argument(help="A deployed path.")],
    revision: Annotated[
        int | None,
        typer.Option(min=1, help="Show this revision's definition instead of the current one."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """The current definition at a path (or of one revision) and its revisions."""
    with remote.client() as api:
        workflow = api.workflow(path, revision=revision).raw
    if as_json:
        remote.print_json(workflow)
        return
    console = Console()
    console.print(
        Text(f"{workflow['path']}  revision {workflow['revision']}  version {workflow['version']}")
    )
    console.print_json(data=workflow["definition"])
    table = Table("revision", "version", "deployed at", "by", title="revisions")
    revisions = workflow.get("revisions")
    for item in revisions if isinstance(revisions, list) else []:
        assert isinstance(item, dict)
        table.add_row(
            str(item["revision"]),
            remote.short(item["version"]),
            str(item["deployed_at"]),
            Text(str(item.get("deployed_by") or "")),
        )
    console.print(table)


@app.command("lint-history")
def lint_history(
    path: Annotated[str, typer.Argument(help="A deployed workflow path.")],
    as_json: JsonFlag = False,
) -> None:
    """List stored events that hold a personal value in clear; exit 1 if there are any.

    PATH's current revision decides what is personal. An event of a process at PATH is
    listed, once per field, when the input its envelope signs (all of a v1 envelope's,
    the part in clear of a v2 one) holds a field that revision marks "x-personal" for
    the event's action: process, seq, action, pointer and event hash, never the value.
    Such an event was signed before the field was marked; its hash covers the value, so
    charter:erase cannot remove it.

    Reads the database (CHARTER_DATABASE_URL, else the embedded one) as the reader role,
    a page of events at a time. Exit 0 when nothing is found, 1 when something is; an
    error (nothing deployed at PATH, no database) is one error line, and exit 1 too.
    """
    # The database and the engine's registry only for this command.
    from charter.audit.personal_lint import current_revision, personal_in_clear
    from charter.core.config import Settings
    from charter.db.database import Database
    from charter.db.embedded import database_url

    with database_url(Settings.from_env()) as url, Database(url, max_size=1) as database:
        revision = current_revision(database, path)
        found = list(personal_in_clear(database, revision))
    where = f"{revision.path} (revision {revision.revision})"
    if as_json:
        remote.print_json(
            {
                "path": revision.path,
                "revision": revision.revision,
                "version": revision.version,
                "in_clear": [item.to_json() for item in found],
            }
        )
        raise typer.Exit(EXIT_PROBLEMS if found else 0)
    if not found:
        Console().print(f"no personal value in clear at {where}", markup=False)
        return
    table = Table("process", "seq", "action", "pointer", "event hash",
                  title="personal values in clear", title_justify="left")  # fmt: skip
    for item in found:
        table.add_row(
            Text(item.process), str(item.seq), Text(item.action), Text(item.pointer), item.hash
        )
    tables.show(tables.whole(table, "process", "event hash"))
    events = len({item.hash for item in found})
    Console().print(
        f"{len(found)} value(s) in clear in {events} event(s) at {where}: signed before "
        "they were marked personal, they cannot be erased",
        markup=False,
    )
    raise typer.Exit(EXIT_PROBLEMS)
