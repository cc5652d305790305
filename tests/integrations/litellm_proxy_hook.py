"""The hook module the test proxy loads (copied beside its config.yaml as ringbound_hook.py):
the example's models with budgets small enough that the test sessions are trimmed, and a sink
that writes each assembly's metrics to the file named by RINGBOUND_TEST_METRICS, where the
test reads what the proxy process recorded (the tests import CONFIG from here too)."""

from __future__ import annotations

import json
import os
import threading

import ringbound as rb
from ringbound.integrations.litellm import RingboundHook

CONFIG = rb.AssemblyConfig(
    model_input_limit=3_000,
    # The test bodies' own max_tokens, which the hook takes as the reserve whatever the
    # config says: the same here, so CONFIG alone describes what the hook applies.
    output_reserve_tokens=256,
    safety_margin_tokens=100,
    recent_tool_rings=2,
    side_effect_tools=["send_email"],
)


class FileSink:
    """A MetricsSink appending one JSON line per assembly."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()

    def write(self, record: dict[str, object]) -> None:
        with self.lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def observe(self, report: rb.AssemblyReport, provider: str) -> None:
        self.write(
            {
                "event": "observe",
                "provider": provider,
                "tokens_before": report.tokens_before,
                "tokens_after": report.tokens_after,
                "budget": report.budget,
                "dropped_rings": len(report.dropped_rings),
            }
        )

    def reject(self, error: rb.RingboundError, provider: str) -> None:
        self.write({"event": "reject", "provider": provider, "error": type(error).__name__})


hook = RingboundHook(
    {"gpt-4o": CONFIG, "claude-sonnet": CONFIG},
    sink=FileSink(os.environ.get("RINGBOUND_TEST_METRICS", os.devnull)),
)
