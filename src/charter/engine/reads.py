"""The engine's reads of one process: itself, its children, its events, its work."""

from __future__ import annotations

from charter.core.errors import UnknownProcess
from charter.core.jsontypes import JsonObject
from charter.db.database import Database, Role
from charter.engine.records import ProcessView, StoredEvent
from charter.engine.store import Store


class Reads:
    """The engine's read side: processes, events and work rows, as the reader role."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def process(self, process_id: str) -> ProcessView:
        with self.database.connection(Role.READER) as conn, conn.transaction():
            found = Store(conn).get_process(process_id)
        if found is None:
            raise UnknownProcess(f"no process {process_id!r}")
        return found

    def children(self, process_id: str) -> list[ProcessView]:
        with self.database.connection(Role.READER) as conn, conn.transaction():
            return Store(conn).child_processes(process_id)

    def events(self, process_id: str) -> list[StoredEvent]:
        with self.database.connection(Role.READER) as conn, conn.transaction():
            store = Store(conn)
            if store.get_process(process_id) is None:
                raise UnknownProcess(f"no process {process_id!r}")
            return store.process_events(process_id)

    def events_with_disclosures(
        self, process_id: str
    ) -> tuple[list[StoredEvent], dict[str, dict[str, str]]]:
        """The events, and the disclosure texts kept for each (event hash -> pointer ->
        text), read in one transaction."""
        with self.database.connection(Role.READER) as conn, conn.transaction():
            store = Store(conn)
            if store.get_process(process_id) is None:
                raise UnknownProcess(f"no process {process_id!r}")
            return store.process_events(process_id), store.kept_disclosures(process_id)

    def automation(self, process_id: str) -> tuple[list[JsonObject], list[JsonObject]]:
        """(scheduled actions, queue rows) of a process."""
        with self.database.connection(Role.READER) as conn, conn.transaction():
            store = Store(conn)
            if store.get_process(process_id) is None:
                raise UnknownProcess(f"no process {process_id!r}")
            return store.process_work(process_id)
