"""`charter verify` and `charter export`: check hash chains, and export them for audit.

`verify ID` checks one stored process, `verify --all` every one (in `--jobs` worker
processes, one per CPU by default; the output is the same whatever their number), and
`verify --bundle FILE` an export file offline: that mode never touches a database (nor
starts the embedded one), so an auditor can run it anywhere. A bundle is replayed
unless `--no-replay` says otherwise (its state and data are not signed: only replay
checks them), and its automated events are checked against the automation keys the
auditor pins with `--automation-key`, or else the ones the bundle lists (and the output
says so). Exit 0 when everything verifies, 1 otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, cast

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from charter.audit.evidence import VerificationReport
from charter.audit.verify_pool import default_jobs, verify_processes
from charter.audit.verify_stored import (
    export_bundle,
    process_ids,
    verify_process,
)
from charter.cli.verify_bundle import bundle_trust, pinned_keys, verify_file
from charter.cli.verify_log import LogCheck, Witnesses
from charter.cli.verify_report import (
    EXIT_OK,
    EXIT_PROBLEMS,
    log_notes,
    print_missing,
    print_summary,
    show,
    write_json,
)
from charter.core.config import Settings
from charter.core.errors import UnknownProcess
from charter.core.jsontypes import JsonObject
from charter.db.database import Database
from charter.db.embedded import database_url
from charter.tlog.config import LogSettings


def verify(
    process_id: Annotated[
        str | None, typer.Argument(help="The process to verify.", show_default=False)
    ] = None,
    all_processes: Annotated[
        bool, typer.Option("--all", help="Verify every process, with a progress bar.")
    ] = False,
    bundle: Annotated[
        Path | None,
        typer.Option(
            "--bundle",
            help="Verify an export file offline, with no database.",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    replay: Annotated[
        bool | None,
        typer.Option(
            "--replay/--no-replay",
            help="Also re-derive state and data from the events "
            "(default: on for --bundle, off for the database).",
            show_default=False,
        ),
    ] = None,
    automation_keys: Annotated[
        list[str] | None,
        typer.Option(
            "--automation-key",
            metavar="HEX",
            help="With --bundle: a public key you trust as the automation actor's "
            "(repeatable); without it, the keys the bundle lists are used.",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            metavar="N",
            help="With --all: verify in N worker processes (default: one per CPU; "
            "1 verifies in this process). The output is the same for any N.",
            show_default=False,
        ),
    ] = None,
    log_dir: Annotated[
        Path | None,
        typer.Option(
            "--log",
            help="Also check each chain against this transparency-log mirror (a log"
            " directory): log_truncated, log_fork, not_logged.",
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    witnesses: Annotated[
        list[str] | None,
        typer.Option(
            "--witness",
            metavar="URL",
            help="With --log or --bundle: compare the log with the latest checkpoint this"
            " witness cosigned (its C2SP monitoring prefix; repeatable) instead of the"
            " policy's witnesses, which are asked by default: a larger one is log_rollback,"
            " a conflicting one checkpoint_equivocation, an unreadable one"
            " witness_unreachable.",
            show_default=False,
        ),
    ] = None,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="With --log or --bundle: ask no witness (the report says so): a rollback"
            " or fork of the log may then go unseen.",
        ),
    ] = False,
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="With --log or --bundle: the tlog-policy to trust (default $CHARTER_HOME/"
            "trust/charter.policy, else the one `charter log init` wrote).",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    salt: Annotated[
        Path | None,
        typer.Option(
            "--salt",
            help="With --log: the log salt file (default CHARTER_LOG_SALT_FILE); with"
            " --bundle: also check the bundle's process key against it.",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    require_log: Annotated[
        bool,
        typer.Option(
            "--require-log",
            help="With --log: events not logged past the grace are problems; with --bundle:"
            " so is a bundle without a log proof.",
        ),
    ] = False,
    log_grace: Annotated[
        float,
        typer.Option(
            "--log-grace",
            min=0.0,
            metavar="SECONDS",
            help="With --log or --bundle: how long an event may wait for the log.",
        ),
    ] = 600.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Verify hashes, signatures, seq, links, spawn causes, automation provenance and heads;
    exit 1 on any problem."""
    chosen = sum([process_id is not None, all_processes, bundle is not None])
    if chosen != 1:
        raise typer.BadParameter("give exactly one of: a process id, --all, --bundle FILE")
    if jobs is not None and not all_processes:
        raise typer.BadParameter("--jobs applies only to --all")
    if offline and witnesses:
        raise typer.BadParameter("--offline asks no witness: drop --witness, or --offline")
    if bundle is not None:
        if log_dir is not None:
            raise typer.BadParameter("--log checks stored chains; a bundle carries its proof")
        pinned = pinned_keys(automation_keys) if automation_keys else None
        replay_bundle = True if replay is None else replay
        trust = bundle_trust(policy, salt, require=require_log, grace_s=log_grace)
        asked = (
            Witnesses.choose(trust.policy, witnesses or (), offline=offline)
            if trust.policy
            else None
        )
        raise typer.Exit(verify_file(bundle, replay_bundle, pinned, trust, asked, as_json=as_json))
    if automation_keys:
        raise typer.BadParameter("--automation-key applies only to --bundle FILE")
    if log_dir is None and (policy or salt or require_log or witnesses or offline):
        raise typer.BadParameter(
            "--policy, --salt, --require-log, --witness and --offline apply only with --log"
            " or --bundle"
        )
    with database_url(Settings.from_env()) as url, Database(url, max_size=2) as database:
        check = None
        if log_dir is not None:
            from charter.cli.verify_log import log_check

            check = log_check(database, log_dir, policy_file=policy, salt_file=salt,
                              require=require_log, grace_s=log_grace,
                              witnesses=witnesses or (), offline=offline)  # fmt: skip
        if process_id is not None:
            raise typer.Exit(_verify_one(database, process_id, bool(replay), check, as_json))
        workers = default_jobs() if jobs is None else jobs
        raise typer.Exit(
            _verify_all(database, replay=bool(replay), as_json=as_json, jobs=workers, check=check)
        )


def _verify_one(
    database: Database, process_id: str, replay: bool, check: LogCheck | None, as_json: bool
) -> int:
    """One stored process; with the log, one the database lacks but the log holds is
    reported `process_missing` instead of unknown."""
    try:
        report = verify_process(database, process_id, replay=replay)
    except UnknownProcess:
        gone = None if check is None else check.missing_one(process_id)
        if gone is None:
            raise
        report, summary = gone
        extra: JsonObject = {"log": cast(JsonObject, summary)}
        return show(process_id, report, as_json=as_json, extra=extra)
    if check is None:
        return show(process_id, report, as_json=as_json)
    report, summary = check(process_id, report)
    notes = log_notes(summary, check)
    return show(
        process_id, report, as_json=as_json, extra={"log": cast(JsonObject, summary)}, notes=notes
    )


def export(
    process_id: Annotated[str, typer.Argument(help="The process to export.", show_default=False)],
    wait_log: Annotated[
        float,
        typer.Option(
            "--wait-log",
            min=0.0,
            metavar="SECONDS",
            help="With a transparency log: how long to wait for the head to be logged.",
        ),
    ] = 10.0,
    withhold_personal: Annotated[
        bool,
        typer.Option(
            "--withhold-personal",
            help="Leave every personal value out: no disclosures, and data derived from "
            'one shown as {"withheld": true}. The bundle still verifies in full.',
        ),
    ] = False,
) -> None:
    """Print a process's export bundle for offline verification: charter-export/1, or
    charter-export/2 with the log proof of its head when this deployment has a log."""
    log = LogSettings.from_env().log_directory()
    with database_url(Settings.from_env()) as url, Database(url, max_size=1) as database:
        bundle = export_bundle(
            database, process_id, log, wait_log=wait_log, withhold_personal=withhold_personal
        )
    write_json(bundle, indent=1)


def _verify_all(
    database: Database, *, replay: bool, as_json: bool, jobs: int, check: LogCheck | None = None
) -> int:
    ids = process_ids(database)
    failed: list[tuple[str, VerificationReport]] = []
    events = 0
    # The bar goes to stderr so `--json` output on stdout stays clean.
    progress = Progress(
        TextColumn("verifying"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=as_json,
    )
    with progress:
        task = progress.add_task("verify", total=len(ids))
        reports = verify_processes(database, ids, replay=replay, jobs=jobs)
        for process_id, report in zip(ids, reports, strict=True):
            if check is not None:
                report, _ = check(process_id, report)
            events += report.events
            if not report.ok:
                failed.append((process_id, report))
            progress.advance(task)
    missing = [] if check is None else check.missing(ids)
    if as_json:
        summary: JsonObject = {
            "processes": len(ids),
            "ok": len(ids) - len(failed),
            "events": events,
            "failed": [{"process": pid, **report.to_json()} for pid, report in failed],
        }
        if check is not None:
            summary["missing"] = [
                {**m.problem(check.size).to_json(), **m.to_json()} for m in missing
            ]
        write_json(summary)
    else:
        print_summary(len(ids), events, failed)
        if check is not None:
            print_missing(missing, check.size)
    return EXIT_PROBLEMS if failed or missing else EXIT_OK
