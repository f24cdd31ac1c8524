"""Who may call the API: bearer tokens with scopes (docs/api.md)."""
