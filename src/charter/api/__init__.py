"""The HTTP API: an app factory, routers per area, one error-to-response table."""
