"""Which failures may pass by themselves (docs/machines.md, rule 7): the executor
releases a run for a retry after these, and fails it after anything else."""

from __future__ import annotations

import httpx

from charter.core.errors import CharterError
from charter.machine.actions import ActionTransient
from charter.sdk.errors import ApiUnavailable

# Service answers that mean "try again later": a proxy or the service itself is down.
TRANSIENT_STATUSES = frozenset({502, 503, 504})
# Transport failures that may pass: timeouts (connect, read, write, pool, and a call's
# whole deadline), network errors (connect, read, write, close) and a peer closing
# mid-response. Not transient: an unsupported scheme, an invalid URL, a proxy
# misconfiguration, too many redirects.
TRANSIENT_TRANSPORT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


def transient_failure(error: BaseException) -> bool:
    """Whether a failure is a transient transport failure, which may pass by itself.

    Exactly: an httpx timeout, network error or remote protocol error
    (`TRANSIENT_TRANSPORT`); an action host's `ActionTransient`; a Charter client's
    `ApiUnavailable` (or `ApiTimeout`), classified by its transport cause when it has
    one. An answer is never a transport failure, whatever its status: a step's target
    answering 5xx or 429 is `TargetAnswered`, retried only when the step opts in, and
    the service answering 502/503/504 is `service_unavailable`.
    """
    if isinstance(error, CharterError) and isinstance(error.__cause__, httpx.TransportError):
        return transient_failure(error.__cause__)
    return isinstance(error, (*TRANSIENT_TRANSPORT, ActionTransient, ApiUnavailable))


def service_unavailable(error: BaseException) -> bool:
    """Whether the Charter service answered the machine that it is unavailable: 502, 503
    or 504 (a proxy or the service is down, e.g. `database_unavailable`). Between the
    machine and the service this is transport, released like a transport failure; it
    applies to the machine API's answers only, never to an action's."""
    if not isinstance(error, CharterError):
        return False
    answer = error.__cause__
    if isinstance(answer, httpx.HTTPStatusError):
        return answer.response.status_code in TRANSIENT_STATUSES
    status = error.context.get("status")
    if not isinstance(status, int) or isinstance(status, bool):
        status = error.http_status
    return status in TRANSIENT_STATUSES


def service_transient(error: BaseException) -> bool:
    """Whether a failure between the machine and the service may pass: released, not failed."""
    return transient_failure(error) or service_unavailable(error)
