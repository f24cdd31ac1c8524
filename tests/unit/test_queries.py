from __future__ import annotations

import pytest

from charter.db.queries import QueryNotFound, all_queries, parse_queries, query


def test_parse_names_describes_and_strips() -> None:
    text = (
        "-- first_query --\n-- Says what it does.\n-- On two lines.\nSELECT 1;\n\n"
        "-- second --\nSELECT %(x)s\n"
    )
    found = parse_queries(text)
    assert list(found) == ["first_query", "second"]
    assert found["first_query"].description == "Says what it does. On two lines."
    assert found["first_query"].sql == "SELECT 1"
    assert found["second"].sql == "SELECT %(x)s"


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="defined twice"):
        parse_queries("-- a --\nSELECT 1\n-- a --\nSELECT 2\n")


def test_a_query_needs_sql() -> None:
    with pytest.raises(ValueError, match="no SQL"):
        parse_queries("-- a --\n-- only a description\n")


def test_shipped_queries_load_and_each_is_described() -> None:
    queries = all_queries()
    assert "record_migration" in queries
    assert all(q.description for q in queries.values())


def test_unknown_query() -> None:
    with pytest.raises(QueryNotFound):
        query("no_such_query")
