"""Archival of finished processes: out of the hot tables into verified export bundles,
with a tombstone left behind (docs/lifecycle.md, "Archival")."""
