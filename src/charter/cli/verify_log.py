"""`charter verify --log DIR`: each chain checked against a transparency-log mirror too."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from charter.core.config import Settings
from charter.core.errors import ConfigurationError
from charter.db.database import Database, Role
from charter.db.queries import query
from charter.engine.evidence import Problem, VerificationReport
from charter.tlog.audit import ChainEvent, LogMirror, check_trusted, check_witness, open_mirror
from charter.tlog.config import LogSettings
from charter.tlog.errors import CheckpointUntrusted, LogProofInvalid, TileMissing
from charter.tlog.policy import parse_policy

Checked = tuple[VerificationReport, dict[str, object]]
LogCheck = Callable[[str, VerificationReport], Checked]
_MIRROR_PROBLEMS = (CheckpointUntrusted, LogProofInvalid, TileMissing)


def default_policy(settings: Settings, log: LogSettings) -> Path:
    """$CHARTER_HOME/trust/charter.policy, else the template `charter log init` wrote."""
    trusted = settings.home / "trust" / "charter.policy"
    return trusted if trusted.is_file() else log.key_file.parent / "charter.policy"


def log_check(
    database: Database,
    directory: Path,
    *,
    policy_file: Path | None,
    salt_file: Path | None,
    require: bool,
    grace_s: float,
    witnesses: Sequence[str] = (),
) -> LogCheck:
    """A function adding the log's problems (and `log` object) to a process's report."""
    settings = Settings.from_env()
    log_settings = LogSettings.from_env()
    policy_path = policy_file or default_policy(settings, log_settings)
    try:
        policy = parse_policy(policy_path.read_bytes())
    except OSError as exc:
        raise ConfigurationError(f"cannot read the policy {policy_path}: {exc}") from None
    if salt_file is not None:
        log_settings = LogSettings(log_settings.directory, log_settings.key_file, salt_file)
    salt = log_settings.salt()
    mirror: LogMirror | None = None
    general: list[Problem] = []
    try:
        mirror = open_mirror(directory, policy, salt)
        trusted = check_trusted(settings.home / "trust", directory, policy)
        general += [trusted] if trusted else []
        for url in witnesses:  # a witness that cannot be read is an error, not a pass
            witnessed = check_witness(url, directory, policy)
            general += [witnessed] if witnessed else []
    except _MIRROR_PROBLEMS as exc:
        general.append(Problem(None, exc.code, exc.message))
    now = datetime.now(UTC)

    def check(process_id: str, report: VerificationReport) -> Checked:
        if mirror is None:
            return VerificationReport.of(report.events, [*report.problems, *general]), {}
        problems, summary = mirror.check(
            process_id, _chain(database, process_id), now=now, grace_s=grace_s, require=require
        )
        merged = [*report.problems, *general, *problems]
        return VerificationReport.of(report.events, merged), summary

    return check


def _chain(database: Database, process_id: str) -> list[ChainEvent]:
    with database.connection(Role.READER) as conn:
        rows = conn.execute(query("log_chain_of"), {"process_id": process_id}).fetchall()
    return [ChainEvent(cast(int, r[0]), str(r[1]), cast("datetime | None", r[2])) for r in rows]
