"""`charter up --demo`: automation happening live within a minute.

Deploys the onboarding workflow with demo-sized durations (examples/onboarding-demo.json),
registers a customer and an analyst, opens a process and submits it; then shows, as
they land, the automatic action (start_screening), the SLA escalation 20 s later and
three periodic reviews 15 s apart — each a signed event of the automation actor whose
provenance names its cause. Everything goes through the public HTTP API.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import sys
import time
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table

from charter.core.config import Settings
from charter.core.ed25519 import SecretKey, read_secret_key_file, write_secret_key_file
from charter.core.errors import Duplicate, UnknownWorkflow
from charter.core.jsontypes import JsonObject
from charter.dsl.canonical import version_hash
from charter.sdk.client import Client

WORKFLOW_PATH = "demo/onboarding"
DEMO_SECONDS = 75.0
REVIEWS = 3


def demo_definition() -> JsonObject:
    text = (resources.files("charter") / "examples" / "onboarding-demo.json").read_text()
    value: JsonObject = json.loads(text)
    return value


async def run_demo(api_url: str, settings: Settings, console: Console, token_path: Path) -> bool:
    """Drive one process through the demo and show its events live; whether its chain
    verified."""
    await asyncio.to_thread(_wait_healthy, api_url)
    token = token_path.read_text().strip()
    with Client(api_url, token) as client:
        customer = await asyncio.to_thread(_actor, client, settings, "demo-customer", "customer")
        process_id = f"demo-{datetime.now(UTC):%Y%m%d-%H%M%S}"
        await asyncio.to_thread(_start, client, customer, process_id)
        console.print(
            f"\n[bold]demo[/] process [cyan]{process_id}[/] opened and submitted; watch the "
            "automation actor take over (auto action now, SLA escalation in 20 s, "
            "reviews every 15 s):\n"
        )
        await _watch(client, process_id, console)
        console.print()
        report = await asyncio.to_thread(client.verify, process_id)
        verdict = "[green]ok[/]" if report.ok else f"[red]{report.raw}[/]"
        console.print(f"[bold]verify[/] {process_id}: {verdict}")
        console.print(
            f"Explore: {explore_command(api_url, token_path, process_id, charter_program())}",
            soft_wrap=True,  # one line: it is meant to be copied
            markup=False,
            highlight=False,
        )
    return report.ok


def explore_command(api_url: str, token_path: Path, process_id: str, program: str) -> str:
    """One line to paste into a shell, where `charter` may well not be on the PATH: it
    exports where the API is and the admin token, then runs `program` (the charter
    executable running the demo) to show the demo's history."""
    token = f'"$(cat {shlex.quote(str(token_path))})"'
    return (
        f"export CHARTER_API_URL={shlex.quote(api_url)} CHARTER_TOKEN={token}"
        f" && {program} history {shlex.quote(process_id)}"
    )


def charter_program(argv0: str | None = None) -> str:
    """The command that runs this very `charter`, for a shell anywhere: the script's
    absolute path (`.venv/bin/charter` in a clone, the venv's or the system's `charter`
    of an installed wheel), or `PYTHON -m charter` when run that way."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    if Path(argv0).name in ("__main__.py", "-m", "-c", ""):
        return f"{shlex.quote(sys.executable)} -m charter"
    found = argv0 if os.sep in argv0 else shutil.which(argv0) or argv0
    return shlex.quote(os.path.abspath(found))


def _wait_healthy(api_url: str) -> None:
    deadline = time.monotonic() + 30
    with Client(api_url) as client:
        while True:
            try:
                client.health()
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def _actor(client: Client, settings: Settings, actor_id: str, role: str) -> SecretKey:
    """The demo actor's key, registered on first use and kept in CHARTER_HOME/demo."""
    path = settings.home / "demo" / f"{actor_id}.key"
    if path.exists():
        return read_secret_key_file(path)
    key = SecretKey.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        client.add_actor(actor_id, key.public_key_hex, [role])
    except Duplicate:
        client.rotate_key(actor_id, key.public_key_hex)  # its old key file was lost
    write_secret_key_file(path, key)
    return key


def _start(client: Client, customer: SecretKey, process_id: str) -> None:
    _deploy_once(client)
    client.submit(customer, process_id, "open", {"name": "Ada Lovelace"}, WORKFLOW_PATH)
    client.submit(customer, process_id, "submit_onboarding", {})


def _deploy_once(client: Client) -> None:
    """Deploy the demo workflow unless that very version is already current."""
    definition = demo_definition()
    try:
        current = client.workflow(WORKFLOW_PATH).deployment.version
    except UnknownWorkflow:
        current = None
    if current != version_hash(definition):
        client.deploy_workflow(WORKFLOW_PATH, definition)


async def _watch(client: Client, process_id: str, console: Console) -> None:
    started = time.monotonic()
    with Live(_table([]), console=console, refresh_per_second=4) as live:
        while time.monotonic() - started < DEMO_SECONDS:
            found = await asyncio.to_thread(client.events, process_id)
            events = [event.raw for event in found]
            live.update(_table(events))
            reviews = sum(1 for e in events if _action(e) == "start_review")
            if reviews >= REVIEWS:
                break
            await asyncio.sleep(0.5)


def _action(event: JsonObject) -> str:
    envelope = event.get("envelope")
    return str(envelope.get("action")) if isinstance(envelope, dict) else "?"


def _table(events: list[JsonObject]) -> Table:
    table = Table("seq", "at", "actor", "action", "why", title="events, as they are appended")
    for event in events:
        envelope = event.get("envelope")
        if not isinstance(envelope, dict):
            continue
        input_ = envelope.get("input")
        meta = input_.get("meta") if isinstance(input_, dict) else None
        provenance = meta.get("automation") if isinstance(meta, dict) else None
        why = "signed by a person"
        if isinstance(provenance, dict):
            if provenance.get("kind") == "auto_action":
                cause = str(provenance.get("queued_by_event_hash", ""))[:12]
                why = f"automatic action, after event {cause}…"
            else:
                cause = str(provenance.get("scheduled_by_event_hash", ""))[:12]
                why = f"schedule {provenance.get('schedule_id')}, set by event {cause}…"
        table.add_row(
            str(event.get("seq")),
            str(envelope.get("at", ""))[11:19],
            str(event.get("actor_id", "")),
            str(envelope.get("action")),
            why,
        )
    return table
