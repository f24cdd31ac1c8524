"""The automations service (docs/automations.md): triggers admit runs of durable step plans that a
chosen machine executes with leases, a step journal, idempotency keys and retries."""
