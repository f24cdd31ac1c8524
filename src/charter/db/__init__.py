"""The database layer: connections per role, named queries, migrations, embedded server."""
