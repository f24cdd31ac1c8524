"""The governed engine: one chokepoint (`process_event`) and what it stands on."""
