"""Charter: a governed workflow and automation engine on PostgreSQL."""

__version__ = "0.1.0"
