"""The workflow DSL v2 (docs/dsl.md) as a pure library: no database, no I/O."""
