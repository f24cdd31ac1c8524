"""The operator views: lists, counts and live hints across processes."""
