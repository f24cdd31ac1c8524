"""The one Prometheus registry every package adds its metric families to.

The API serves it at /metrics and the worker on its own metrics port; the process's
own figures (CPU, memory, open files, the runtime's GC) are registered here once.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

# No `_created` series: one more time series per counter, which nobody queries.
disable_created_metrics()  # type: ignore[no-untyped-call]
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)
