"""The machine (`charter machine run`), which runs on another host than the service: the
executor that walks claimed runs, the action hosts it invokes, and its client of the
machine API (docs/machines.md)."""
