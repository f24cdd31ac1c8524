"""A workflow's life across revisions: what deploying a new definition would do to the
processes that run under the current one (docs/lifecycle.md)."""
