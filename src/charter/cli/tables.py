"""Tables for people that keep ids whole.

An id in a table is what another command takes (`charter show`, `timers`, `runs cancel`,
`tokens revoke`...), so it is never cut with an ellipsis: its column does not wrap, and
when the terminal is too narrow for the table, the table is printed as wide as it needs
(the terminal wraps the long lines) rather than cropped.
"""

from __future__ import annotations

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table

# Wider than any table: the measure of what a table needs, unconstrained.
_UNBOUNDED = 100_000


def whole(table: Table, *headers: str) -> Table:
    """Show the columns named `headers` whole: no wrapping, no ellipsis."""
    for column in table.columns:
        if column.header in headers:
            column.no_wrap = True
            column.overflow = "ignore"
    return table


def show(renderable: RenderableType, *, stderr: bool = False) -> None:
    """Print `renderable` at the terminal's width, or wider when its whole ids need it."""
    console = Console(soft_wrap=False, stderr=stderr)
    options = console.options.update(max_width=_UNBOUNDED)
    needed = Measurement.get(console, options, renderable).minimum
    if needed > console.width:
        console = Console(soft_wrap=False, stderr=stderr, width=needed)
    console.print(renderable)
