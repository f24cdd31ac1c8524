"""Deploy-time checks of `mutate` (its meaning is in `charter.dsl.mutate`).

`$unset` takes a list of field paths; the other operators take an object mapping field
paths to values (templates allowed). `$inc` values are numbers or whole `{{ expr }}`
templates, `$merge` values objects or whole templates. A field may be written by one
operator entry only, so the fixed operator order never decides a silent conflict.
"""

from __future__ import annotations

from collections.abc import Iterator

from charter.core.jsontypes import JsonValue
from charter.dsl.checks import Context, Path, Problems, is_whole_template, template
from charter.dsl.model import ROOT, FieldOp, Mutate
from charter.dsl.templates import Template

OPERATORS = ("$set", "$unset", "$inc", "$push", "$merge")


def check_mutate(
    ctx: Context,
    raw: dict[str, JsonValue],
    path: Path,
    to: str | None,
    to_ok: bool,
) -> Mutate:
    """The `mutate` model of action `raw` at `path`; problems go to `ctx.out`.

    `to_ok` is False when `to` is broken (and already reported).
    """
    out = ctx.out
    if "mutate" not in raw:
        return Mutate()
    value, path = raw["mutate"], (*path, "mutate")
    if not isinstance(value, dict):
        out.add(path, "must be an object of operators: " + ", ".join(OPERATORS))
        return Mutate()
    ops: dict[str, list[FieldOp]] = {op: [] for op in OPERATORS}
    written: list[tuple[Path, str, str]] = []
    for op, body in value.items():
        here = (*path, op)
        if op not in OPERATORS:
            out.add(here, f"unknown operator {op!r}: use one of " + ", ".join(OPERATORS))
            continue
        for entry, field_path, item in _entries(out, op, body, here):
            segments = _segments(op, field_path)
            if segments is None:
                out.add(entry, f"{field_path!r} is not a field path: names separated by '.'")
                continue
            _check_state(out, op, segments, item, entry, to, to_ok)
            compiled = None if op == "$unset" else _value(ctx, op, item, entry)
            written.append((entry, op, field_path))
            ops[op].append(FieldOp(field_path, segments, compiled))
    _conflicts(out, written)
    return Mutate(
        set=tuple(ops["$set"]),
        unset=tuple(ops["$unset"]),
        inc=tuple(ops["$inc"]),
        push=tuple(ops["$push"]),
        merge=tuple(ops["$merge"]),
    )


def _entries(
    out: Problems, op: str, body: JsonValue, here: Path
) -> Iterator[tuple[Path, str, JsonValue]]:
    if op == "$unset":
        if not isinstance(body, list):
            out.add(here, "must be a list of field paths")
            return
        for index, item in enumerate(body):
            if isinstance(item, str):
                yield (*here, index), item, None
            else:
                out.add((*here, index), "must be a field path")
        return
    if not isinstance(body, dict):
        out.add(here, "must be an object mapping field paths to values")
        return
    for key, item in body.items():
        yield (*here, key), key, item


def _segments(op: str, field_path: str) -> tuple[str, ...] | None:
    if op == "$merge" and field_path == ROOT:
        return ()
    segments = tuple(field_path.split("."))
    return segments if all(segments) else None


def _check_state(
    out: Problems,
    op: str,
    segments: tuple[str, ...],
    raw: JsonValue,
    entry: Path,
    to: str | None,
    to_ok: bool,
) -> None:
    if op == "$merge" and not segments and isinstance(raw, dict) and "state" in raw:
        _state_value(out, raw["state"], (*entry, "state"), to, to_ok)
    elif segments and segments[0] == "state":
        if op == "$set" and len(segments) == 1:
            _state_value(out, raw, entry, to, to_ok)
        else:
            out.add(entry, f"{op} cannot change 'state': it is set by 'to'")


def _state_value(out: Problems, value: JsonValue, entry: Path, to: str | None, to_ok: bool) -> None:
    if not to_ok:
        return  # `to` itself is broken and already reported
    if to is None:
        out.add(entry, "'state' is set by 'to', and this action has no 'to'")
    elif value != to:
        out.add(entry, f"$set of state {value!r} disagrees with 'to' ({to!r})")


def _value(ctx: Context, op: str, raw: JsonValue, entry: Path) -> Template | None:
    if op == "$inc" and not (type(raw) in (int, float) or is_whole_template(raw)):
        ctx.out.add(entry, "must be a number or a '{{ expr }}' template")
        return None
    if op == "$merge" and not (isinstance(raw, dict) or is_whole_template(raw)):
        ctx.out.add(entry, "must be an object or a '{{ expr }}' template")
        return None
    return template(ctx.out, raw, entry)


def _conflicts(out: Problems, written: list[tuple[Path, str, str]]) -> None:
    for index, (entry, _, field_path) in enumerate(written):
        for _, other_op, other in written[:index]:
            if ROOT in (field_path, other):
                continue  # a root $merge applies last, on top of the other operators
            if _overlap(field_path, other):
                out.add(entry, f"conflicts with {other_op} {other!r}: write each field once")
                break


def _overlap(a: str, b: str) -> bool:
    """Whether writing `a` and `b` touches the same field (equal, or one inside the other)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")
