"""`charter verify --bundle FILE`: an export file checked offline, with no database: its
chain, its replay, its automated events against pinned keys, and its log proof against
the policy and, when asked, the witnesses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import typer
from rich.console import Console

from charter.audit.bundle_log import BundleTrust, bundle_checkpoint, compare_bundle_with_witness
from charter.audit.evidence import Problem, VerificationReport
from charter.audit.verify_stored import verify_bundle, verify_bundle_log
from charter.cli.verify_log import Witnesses, default_policy
from charter.cli.verify_report import EXIT_UNREADABLE, UNREADABLE_CODE, show
from charter.core import ijson
from charter.core.config import Settings
from charter.core.ed25519 import check_public_key
from charter.core.errors import ConfigurationError, InvalidPublicKey, Malformed
from charter.core.jsontypes import JsonObject, JsonValue
from charter.tlog.config import LogSettings
from charter.tlog.policy import Policy, parse_policy


def bundle_trust(
    policy: Path | None, salt: Path | None, *, require: bool, grace_s: float
) -> BundleTrust:
    """What verifying a bundle's log proof trusts: the policy given, else the default one
    if it exists (none: a proof is `checkpoint_untrusted`), and the salt only if given."""
    settings, log_settings = Settings.from_env(), LogSettings.from_env()
    path = policy or default_policy(settings, log_settings)
    parsed = None
    if policy is not None or path.is_file():
        try:
            parsed = parse_policy(path.read_bytes())
        except OSError as exc:
            raise ConfigurationError(f"cannot read the policy {path}: {exc}") from None
    salted = None
    if salt is not None:
        salted = LogSettings(log_settings.directory, log_settings.key_file, salt).salt()
    return BundleTrust(parsed, salted, settings.home / "trust", require, grace_s)


def pinned_keys(values: list[str]) -> tuple[str, ...]:
    keys = []
    for value in values:
        key = value.strip().lower()
        try:
            check_public_key(key)
        except InvalidPublicKey as exc:
            raise typer.BadParameter(f"--automation-key {value!r}: {exc.message}") from None
        keys.append(key)
    return tuple(keys)


def verify_file(
    path: Path,
    replay: bool,
    pinned: tuple[str, ...] | None,
    trust: BundleTrust,
    asked: Witnesses | None,
    *,
    as_json: bool,
) -> int:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        message = f"{path}: cannot read: {exc.strerror or exc}"
        if as_json:
            # A script gets the failure as data, as every command's errors under --json.
            error = {"code": UNREADABLE_CODE, "message": message, "path": str(path)}
            typer.echo(json.dumps({"error": error}, ensure_ascii=True), err=True)
        else:
            Console(stderr=True).print(message, markup=False)
        return EXIT_UNREADABLE
    log: JsonObject | None = None
    try:
        value = ijson.loads(raw)
        report = verify_bundle(value, replay=replay, automation_keys=pinned)
        report, log = verify_bundle_log(value, report, trust)
        if log is not None and log.get("proven") and asked is not None:
            report, log = _bundle_witnesses(value, report, log, trust, asked)
    except Malformed as exc:
        # A file that is not I-JSON is bad evidence, not an unusable command line.
        report = VerificationReport.of(0, [Problem(None, "malformed_bundle", exc.message)])
    extra: JsonObject = {
        "replayed": replay,
        "automation_keys": "bundle" if pinned is None else "pinned",
    }
    if log is not None:  # a charter-export/1 report stays as it was
        extra["log"] = log
    notes = [
        "automation keys: "
        + (
            "as the bundle itself lists them (not pinned: give --automation-key HEX "
            "to check against keys you trust)"
            if pinned is None
            else f"pinned ({len(pinned)} given with --automation-key)"
        ),
        "state and data: "
        + ("replayed from the events" if replay else "not checked (--no-replay)"),
    ]
    log_note = _bundle_log_note(log)
    notes += [log_note] if log_note else []
    if log is not None and log.get("proven") and asked is not None:
        notes.append(f"log: {asked.note()}")
    return show(str(path), report, as_json=as_json, extra=extra, notes=notes)


def _bundle_witnesses(
    bundle: JsonValue,
    report: VerificationReport,
    log: JsonObject,
    trust: BundleTrust,
    asked: Witnesses,
) -> tuple[VerificationReport, JsonObject]:
    """The bundle's proven checkpoint against what the witnesses cosigned since."""
    assert trust.policy is not None
    note = bundle_checkpoint(bundle)
    problems = asked.ask(
        lambda url, held: compare_bundle_with_witness(
            url, held, cast("Policy", trust.policy), note
        ),
        str(log["origin"]),
    )
    merged = VerificationReport.of(report.events, [*report.problems, *problems])
    return merged, log | cast(JsonObject, asked.summary())


def _bundle_log_note(log: JsonObject | None) -> str | None:
    if log is None:
        return None
    if not log.get("proven"):
        return f"log: {log.get('origin')}: no proof verified"
    return (
        f"log: seq {log['seq']} proven in {log['origin']} at size {log['checkpoint_size']}"
        f" (witnesses: {', '.join(cast(list[str], log['witnesses'])) or 'none'});"
        f" {log['unlogged']} later event(s) not proven; completeness: lower bound only"
    )
