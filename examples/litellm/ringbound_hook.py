"""The ringbound hook of examples/litellm/config.yaml: one config per model the proxy serves,
keyed by the config's `model_name`."""

from __future__ import annotations

import ringbound as rb
from ringbound.integrations.litellm import RingboundHook

# Tools whose dropped calls the ledger note keeps, so the model does not run them again.
SIDE_EFFECTS = ["send_email", "create_ticket", "charge_card"]

hook = RingboundHook(
    {
        "gpt-4o": rb.AssemblyConfig(
            model_input_limit=128_000,
            output_reserve_tokens=16_384,
            side_effect_tools=SIDE_EFFECTS,
        ),
        "claude-sonnet": rb.AssemblyConfig(
            model_input_limit=200_000,
            output_reserve_tokens=16_000,
            safety_margin_tokens=4_000,  # Claude is counted by estimate: a wider margin
            side_effect_tools=SIDE_EFFECTS,
        ),
    },
    # Models without an entry are sent as they are; give a default to assemble them too.
    default=None,
)
