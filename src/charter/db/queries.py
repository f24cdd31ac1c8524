"""Named SQL queries loaded from `charter/sql/queries/*.sql`.

A file holds queries in procrastinate's style::

    -- record_migration --
    -- Record a migration as applied; returns nothing if it already was.
    INSERT INTO ...;

The header names the query, the following comment lines describe it, the rest is SQL
with `%(name)s` parameters. Runtime Python holds no ad-hoc SQL strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import LiteralString

_HEADER = re.compile(r"^-- ([a-z][a-z0-9_]*) --$", re.MULTILINE)


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    sql: LiteralString


class QueryNotFound(KeyError):
    """No query by that name."""


def parse_queries(text: str) -> dict[str, Query]:
    """Split a queries file into named queries; duplicate names are an error."""
    found: dict[str, Query] = {}
    headers = list(_HEADER.finditer(text))
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        body = text[header.end() : end].strip("\n")
        description_lines: list[str] = []
        sql_lines: list[str] = []
        for line in body.splitlines():
            if not sql_lines and line.startswith("--"):
                description_lines.append(line[2:].strip())
            else:
                sql_lines.append(line)
        name = header.group(1)
        if name in found:
            raise ValueError(f"query {name!r} is defined twice")
        sql = "\n".join(sql_lines).strip().rstrip(";").strip()
        if not sql:
            raise ValueError(f"query {name!r} has no SQL")
        # The text comes from files shipped inside the package, never from input.
        found[name] = Query(name, " ".join(description_lines), sql)
    return found


@cache
def all_queries() -> dict[str, Query]:
    """Every query of every file under charter/sql/queries, loaded once."""
    merged: dict[str, Query] = {}
    folder = resources.files("charter") / "sql" / "queries"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        for name, query in parse_queries(entry.read_text(encoding="utf-8")).items():
            if name in merged:
                raise ValueError(f"query {name!r} is defined in two files")
            merged[name] = query
    return merged


def query(name: str) -> LiteralString:
    """The SQL of a named query."""
    try:
        return all_queries()[name].sql
    except KeyError:
        raise QueryNotFound(name) from None
