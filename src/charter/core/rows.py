"""Typed records from database rows: one dataclass field per column."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Self


class RowRecord:
    """Mixin for frozen dataclasses read with psycopg's dict_row; extra columns are
    ignored, so a query may select more than the record keeps."""

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> Self:
        return cls(**{f.name: row[f.name] for f in fields(cls)})  # type: ignore[arg-type]
