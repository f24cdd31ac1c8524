"""Every error a Charter server answers with, by wire code: the one table the API's
classes come from and the SDK rebuilds answers with.

An error answer `{"error": {"code": ...}}` names one of these codes; `BY_CODE` gives its
class, so a client raises the class the server raised (`StalePrev`, `RunFinished`, ...)
whatever else it has imported. A new error class goes here, or it cannot be answered
in kind (a test holds every class under `charter.core.errors` to this list, and every
code to exactly one class).
"""

from __future__ import annotations

from charter.core import errors as general
from charter.core.errors import CharterError, automations, lists, log, workflows

WIRE_ERRORS: tuple[type[CharterError], ...] = (
    # charter.core.errors
    general.CharterError,
    general.Malformed,
    general.BadSignature,
    general.Unauthorized,
    general.UnknownActor,
    general.ForbiddenRole,
    general.ReservedField,
    general.Forbidden,
    general.UnknownProcess,
    general.UnknownWorkflow,
    general.UnknownAction,
    general.NotFound,
    general.StalePrev,
    general.Duplicate,
    general.TooLarge,
    general.WrongState,
    general.ConditionFailed,
    general.InvalidInput,
    general.NotDue,
    general.WorkflowMismatch,
    general.ClockSkew,
    general.BadDisclosure,
    general.PersonalInClear,
    general.InvalidWorkflow,
    general.ConfigurationError,
    general.KeyFileError,
    general.DatabaseUnavailable,
    general.SerializationConflict,
    general.PermissionDenied,
    general.AppendOnlyViolation,
    general.ChainViolation,
    general.IntegrityViolation,
    general.LeaseLost,
    general.MigrationError,
    general.InvalidPublicKey,
    general.AutomationRolesFixed,
    general.InvalidSecretKey,
    # charter.core.errors.workflows
    workflows.DslError,
    workflows.ExpressionError,
    workflows.ExpressionLimitError,
    workflows.DurationError,
    workflows.TemplateError,
    workflows.StrandsProcesses,
    # charter.core.errors.automations
    automations.InvalidAutomation,
    automations.InvalidWebhook,
    automations.AutomationPaused,
    automations.NoPlan,
    automations.RunFinished,
    automations.RunNotFailed,
    automations.UnknownStep,
    automations.StepOutOfOrder,
    automations.StepCompleted,
    automations.StepNotStarted,
    automations.RunIncomplete,
    automations.InvalidSchedule,
    automations.InvalidPlan,
    automations.InvalidDpop,
    # charter.core.errors.lists
    lists.InvalidCursor,
    lists.InvalidLimit,
    lists.InvalidFilter,
    # charter.core.errors.log
    log.TlogError,
    log.LogProofInvalid,
    log.WitnessUnreachable,
    log.MalformedEntry,
    log.InvalidSalt,
    log.MalformedKey,
    log.MalformedNote,
    log.AmbiguousKey,
    log.BadNoteSignature,
    log.MalformedCheckpoint,
    log.CheckpointUntrusted,
    log.MalformedTilePath,
    log.MalformedTile,
    log.TileMissing,
    log.MalformedPolicy,
    log.MalformedProof,
    log.ProofRange,
    log.LogNotConfigured,
    log.NotLogged,
    log.LogHalted,
    log.DbBehindLog,
    log.LogBehindDb,
    log.LogGap,
    log.LogBehindWitness,
    log.LogQueueForged,
    log.LogDirectoryMoved,
    log.CheckpointNotPublished,
)

BY_CODE: dict[str, type[CharterError]] = {cls.code: cls for cls in WIRE_ERRORS}
