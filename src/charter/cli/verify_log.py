"""`charter verify --log DIR`: each chain checked against a transparency-log mirror too,
and the mirror (or a bundle's checkpoint, or a log being mirrored) against its witnesses.

A verifier with no history of its own (no trust directory yet) cannot tell a rolled-back
or forked log from the real one by itself: only a witness that cosigned a later tree can.
So when the policy names witnesses they are asked by default (their monitoring endpoint:
the URL on their policy line, or `--witness URL`), and one that cannot be read is a
problem, `witness_unreachable`, unless `--offline` says to skip them (the report says so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from charter.audit.evidence import Problem, VerificationReport
from charter.audit.log_check import (
    ChainEvent,
    LogMirror,
    MissingProcess,
    check_trusted,
    compare_with_witness,
    open_mirror,
    read_witness_http,
)
from charter.core.config import Settings
from charter.core.errors import ConfigurationError
from charter.core.errors.log import (
    CheckpointUntrusted,
    LogProofInvalid,
    TileMissing,
    WitnessUnreachable,
)
from charter.db.database import Database, Role
from charter.tlog import store as log_store
from charter.tlog.config import LogSettings
from charter.tlog.logdir import LogDirectory
from charter.tlog.policy import Policy, parse_policy
from charter.witness.local import LOCAL_SCHEME, read_local_witness

Checked = tuple[VerificationReport, dict[str, object]]
_MIRROR_PROBLEMS = (CheckpointUntrusted, LogProofInvalid, TileMissing)
NO_WITNESS = "the policy names no witness: a rollback or fork of the log is undetectable"


def default_policy(settings: Settings, log: LogSettings) -> Path:
    """$CHARTER_HOME/trust/charter.policy, else the template `charter log init` wrote."""
    trusted = settings.home / "trust" / "charter.policy"
    return trusted if trusted.is_file() else log.key_file.parent / "charter.policy"


def read_policy(path: Path) -> Policy:
    try:
        return parse_policy(path.read_bytes())
    except OSError as exc:
        raise ConfigurationError(f"cannot read the policy {path}: {exc}") from None


def read_witness(url: str, origin: str) -> bytes | None:
    """The latest checkpoint a witness holds for `origin`: over HTTP, or from the state
    directory of a local witness (`file:` URL, as `charter log init` writes for a demo)."""
    if url.startswith(LOCAL_SCHEME):
        return read_local_witness(url, origin)
    return read_witness_http(url, origin)


@dataclass(frozen=True, slots=True)
class Witnesses:
    """Which witnesses a check asks: `--witness` URLs, else the policy's; none offline.
    `problems`: policy witnesses that cannot be asked (no URL on their line)."""

    urls: tuple[str, ...]
    offline: bool
    named: bool  # the policy names at least one witness
    problems: tuple[Problem, ...] = ()

    @classmethod
    def choose(cls, policy: Policy, given: Sequence[str], *, offline: bool) -> Witnesses:
        named = bool(policy.witnesses)
        if offline:
            return cls((), True, named)
        if given:
            return cls(tuple(given), False, named)
        unaskable = tuple(
            Problem(
                None,
                "witness_unreachable",
                f"the policy gives witness {w.name} no URL: pass --witness URL (its"
                " monitoring prefix), or --offline to check without the witnesses",
            )
            for w in policy.witnesses.values()
            if not w.url
        )
        urls = tuple(w.url for w in policy.witnesses.values() if w.url)
        return cls(urls, False, named, unaskable)

    def ask(self, compare: Callable[[str, bytes], Problem | None], origin: str) -> list[Problem]:
        """Read each witness's latest checkpoint of `origin` and `compare` the log with it."""
        problems = list(self.problems)
        for url in self.urls:
            try:
                held = read_witness(url, origin)
            except WitnessUnreachable as exc:
                problems.append(
                    Problem(
                        None,
                        "witness_unreachable",
                        f"{exc.message} (--offline checks without the witnesses)",
                    )
                )
                continue
            problem = None if held is None else compare(url, held)
            problems += [problem] if problem else []
        return problems

    def summary(self) -> dict[str, object]:
        return {"witnesses_asked": list(self.urls), "offline": self.offline}

    def note(self) -> str:
        if self.offline:
            return "offline: no witness was asked (a rollback or fork may go unseen)"
        if not self.named and not self.urls:
            return NO_WITNESS
        return f"witnesses asked: {', '.join(self.urls) or 'none'}"


@dataclass
class LogCheck:
    """Adds the log's problems (and the report's `log` object) to a process's report."""

    mirror: LogMirror | None
    general: list[Problem]
    witnesses: Witnesses
    chain: Callable[[str], list[ChainEvent]]
    grace_s: float
    require: bool
    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __call__(self, process_id: str, report: VerificationReport) -> Checked:
        if self.mirror is None:
            return VerificationReport.of(report.events, [*report.problems, *self.general]), {}
        problems, summary = self.mirror.check(
            process_id,
            self.chain(process_id),
            now=self.now,
            grace_s=self.grace_s,
            require=self.require,
        )
        merged = [*report.problems, *self.general, *problems]
        return VerificationReport.of(report.events, merged), summary | self.witnesses.summary()

    def missing(self, stored: Sequence[str]) -> list[MissingProcess]:
        """The log's processes that none of the `stored` ids is (`process_missing`)."""
        return [] if self.mirror is None else self.mirror.missing(stored)

    def missing_one(self, process_id: str) -> Checked | None:
        """For a process id the database does not have: its report when the log holds it."""
        if self.mirror is None:
            return None
        key = self.mirror.key(process_id)
        gone = next((m for m in self.mirror.missing([]) if m.process_key == key), None)
        if gone is None:
            return None
        size = self.mirror.checkpoint.size
        report = VerificationReport.of(0, [*self.general, gone.problem(size)])
        return report, {
            "origin": self.mirror.checkpoint.origin,
            "checkpoint_size": size,
            "missing": gone.to_json(),
        } | self.witnesses.summary()

    @property
    def size(self) -> int:
        return 0 if self.mirror is None else self.mirror.checkpoint.size


def log_check(
    database: Database,
    directory: Path,
    *,
    policy_file: Path | None,
    salt_file: Path | None,
    require: bool,
    grace_s: float,
    witnesses: Sequence[str] = (),
    offline: bool = False,
) -> LogCheck:
    """The check of stored chains against the mirror in `directory`."""
    settings = Settings.from_env()
    log_settings = LogSettings.from_env()
    policy = read_policy(policy_file or default_policy(settings, log_settings))
    if salt_file is not None:
        log_settings = LogSettings(log_settings.directory, log_settings.key_file, salt_file)
    salt = log_settings.salt()
    asked = Witnesses.choose(policy, witnesses, offline=offline)
    mirror: LogMirror | None = None
    general: list[Problem] = []
    try:
        mirror = open_mirror(directory, policy, salt)
        trusted = check_trusted(settings.home / "trust", directory, policy)
        general += [trusted] if trusted else []
        note = LogDirectory(directory).checkpoint_note() or b""
        general += asked.ask(
            lambda url, held: compare_with_witness(
                url, held, policy, note, mirror.checkpoint, LogDirectory(directory).tiles
            ),
            mirror.checkpoint.origin,
        )
    except _MIRROR_PROBLEMS as exc:
        general.append(Problem(None, exc.code, exc.message))
    return LogCheck(mirror, general, asked, lambda pid: _chain(database, pid), grace_s, require)


def _chain(database: Database, process_id: str) -> list[ChainEvent]:
    with database.connection(Role.READER) as conn:
        return [ChainEvent(*row) for row in log_store.chain_of(conn, process_id)]
