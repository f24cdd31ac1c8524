"""A readable, deterministic dump of the charter schema (the committed snapshot).

pg_dump's output changes with the client and server versions (headers, SET lines,
ordering details), so the snapshot is rendered from the catalogs instead: tables with
their columns, constraints, indexes, triggers and grants, then functions.
"""

from __future__ import annotations

from collections import defaultdict
from importlib import resources

import psycopg

from charter.db.errors import translated
from charter.db.queries import query

HEADER = (
    "-- Charter schema snapshot, rendered from the catalogs by `charter db schema`.\n"
    "-- Do not edit: tests/migration checks that migrating from zero reproduces it.\n"
)


def committed_snapshot() -> str:
    """The snapshot shipped with this release."""
    return (resources.files("charter") / "sql" / "schema.snapshot.sql").read_text("utf-8")


def render_schema(conn: psycopg.Connection[tuple[object, ...]]) -> str:
    """The current schema as SQL-like text, identical for identical schemas."""
    with translated():
        fetch = {
            name: conn.execute(query(name)).fetchall()
            for name in (
                "schema_grants",
                "schema_columns",
                "schema_constraints",
                "schema_indexes",
                "schema_triggers",
                "schema_table_grants",
                "schema_column_grants",
                "schema_functions",
                "schema_function_grants",
            )
        }
    out = [HEADER]
    schema_grants = ", ".join(f"{priv} TO {who}" for who, priv in fetch["schema_grants"])
    out.append(f"-- schema charter: {schema_grants or 'no grants'}\n")

    columns: dict[str, list[str]] = defaultdict(list)
    for table, name, type_, not_null, default, identity in fetch["schema_columns"]:
        column = f"    {name} {type_}"
        if identity:
            column += " GENERATED " + ("ALWAYS" if identity == "a" else "BY DEFAULT")
            column += " AS IDENTITY"
        elif default is not None:
            column += f" DEFAULT {default}"
        if not_null:
            column += " NOT NULL"
        columns[str(table)].append(column)

    per_table: dict[str, list[str]] = defaultdict(list)
    for table, name, definition in fetch["schema_constraints"]:
        per_table[str(table)].append(
            f"ALTER TABLE charter.{table} ADD CONSTRAINT {name} {definition};"
        )
    for table, definition in fetch["schema_indexes"]:
        per_table[str(table)].append(f"{definition};")
    for table, definition in fetch["schema_triggers"]:
        per_table[str(table)].append(f"{definition};")
    for table, grantee, privilege in fetch["schema_table_grants"]:
        per_table[str(table)].append(f"GRANT {privilege} ON charter.{table} TO {grantee};")
    column_grants: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for table, grantee, privilege, column_name in fetch["schema_column_grants"]:
        column_grants[(str(table), str(grantee), str(privilege))].append(str(column_name))
    for (grant_table, grant_to, grant_privilege), names in column_grants.items():
        per_table[grant_table].append(
            f"GRANT {grant_privilege} ({', '.join(names)}) ON charter.{grant_table} TO {grant_to};"
        )

    for table in sorted(columns):
        out.append(f"\nCREATE TABLE charter.{table} (\n" + ",\n".join(columns[table]) + "\n);")
        out.extend(per_table[table])

    function_grants: dict[str, list[str]] = defaultdict(list)
    for signature, grantee, privilege in fetch["schema_function_grants"]:
        function_grants[str(signature)].append(
            f"GRANT {privilege} ON FUNCTION {signature} TO {grantee};"
        )
    for signature, definition in fetch["schema_functions"]:
        out.append(f"\n{str(definition).strip()};")
        out.extend(function_grants.get(str(signature), []))
    return "\n".join(out) + "\n"
