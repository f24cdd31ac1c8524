"""The `charter` command line: one module per command group."""
