"""The action registry: which host runs an action id on this machine, and the hosts
Charter ships (`default_registry`)."""

from __future__ import annotations

from collections.abc import Mapping

from charter.automations.plan import ACTION_ID
from charter.core.config import Settings
from charter.core.errors import CharterError
from charter.machine.actions import ActionHost
from charter.machine.charter_submit import CharterSubmitAction
from charter.machine.http_request import HttpRequestAction


class UnknownActionHost(CharterError):
    """No action host is registered for this action id."""

    code = "unknown_action_host"
    http_status = 422


class ActionRegistry:
    """Action id → host. Registration is explicit; there is no fallback host."""

    def __init__(self, hosts: Mapping[str, ActionHost] | None = None) -> None:
        self._hosts: dict[str, ActionHost] = {}
        for action_id, host in (hosts or {}).items():
            self.register(action_id, host)

    def register(self, action_id: str, host: ActionHost) -> None:
        if not ACTION_ID.fullmatch(action_id):
            raise ValueError(f"{action_id!r} is not an action id like 'http.request'")
        if action_id in self._hosts:
            raise ValueError(f"an action host for {action_id!r} is registered already")
        self._hosts[action_id] = host

    def get(self, action_id: str) -> ActionHost:
        try:
            return self._hosts[action_id]
        except KeyError:
            raise UnknownActionHost(
                f"no action host for {action_id!r} on this machine", action_id=action_id
            ) from None

    def __contains__(self, action_id: object) -> bool:
        return action_id in self._hosts

    def ids(self) -> list[str]:
        return sorted(self._hosts)


def default_registry(settings: Settings | None = None) -> ActionRegistry:
    """The hosts Charter ships: `http.request` and `charter.submit`."""
    settings = settings or Settings.from_env()
    return ActionRegistry(
        {
            "http.request": HttpRequestAction(),
            "charter.submit": CharterSubmitAction(settings.api_url, settings.token),
        }
    )
