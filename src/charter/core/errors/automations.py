"""The automations service's refusals (control API, plans, schedules, DPoP, the step
journal), each with its wire code and HTTP status.

They live apart from the modules that raise them, in the error catalogue
(`charter.core.errors.catalogue`), so that a client rebuilds them without loading any
server code.
"""

from __future__ import annotations

from charter.core.errors import CharterError

# --- the control API -------------------------------------------------------------------


class InvalidAutomation(CharterError):
    """The automation's name, target or enabled flag is invalid."""

    code = "invalid_automation"
    http_status = 422


class InvalidWebhook(CharterError):
    """The webhook trigger's source, event, secret or enabled flag is invalid."""

    code = "invalid_webhook"
    http_status = 422


class AutomationPaused(CharterError):
    """The automation is paused: resume it before triggering a run."""

    code = "automation_paused"
    http_status = 409


class NoPlan(CharterError):
    """The automation has no plan: set one before triggering a run."""

    code = "no_plan"
    http_status = 409


# --- runs ------------------------------------------------------------------------------


class RunFinished(CharterError):
    """The run has finished: it can no longer be cancelled."""

    code = "run_finished"
    http_status = 409


class RunNotFailed(CharterError):
    """Only a failed run can be retried."""

    code = "run_not_failed"
    http_status = 409


# --- the step journal (the machine API) ------------------------------------------------


class UnknownStep(CharterError):
    """The run's plan has no such step."""

    code = "unknown_step"
    http_status = 404


class StepOutOfOrder(CharterError):
    """An earlier step of the plan is not completed: a run advances in order."""

    code = "step_out_of_order"
    http_status = 409


class StepCompleted(CharterError):
    """The step is completed: it is never invoked again."""

    code = "step_completed"
    http_status = 409


class StepNotStarted(CharterError):
    """The step is not running: journal it as started first."""

    code = "step_not_started"
    http_status = 409


class RunIncomplete(CharterError):
    """Not every step of the plan is completed."""

    code = "run_incomplete"
    http_status = 409


class InvalidSchedule(CharterError):
    """The schedule is not a valid cron expression in a known IANA time zone."""

    code = "invalid_schedule"
    http_status = 422


class InvalidPlan(CharterError):
    """The plan is not a valid version 1 plan."""

    code = "invalid_plan"
    http_status = 422


class InvalidDpop(CharterError):
    """The DPoP proof is missing or invalid."""

    code = "invalid_dpop"
    http_status = 401
