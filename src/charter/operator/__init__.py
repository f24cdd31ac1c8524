"""The operator views (issue 11): lists, counts and live hints across processes."""
