"""Shared foundations: errors, clock, configuration, canonical JSON and signatures."""
