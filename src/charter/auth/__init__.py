"""Who may call the API: bearer tokens with scopes (DESIGN §8)."""
