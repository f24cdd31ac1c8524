"""The workflow DSL v2 (DESIGN §4) as a pure library: no database, no I/O."""
