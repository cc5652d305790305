"""The ringbound hook of examples/litellm/config.yaml. With no window given, each model is sized
from what the proxy knows of it: its deployment's `model_info`, LiteLLM's model map, then
ringbound's models table; the provider from the deployment's route (`anthropic/...`); the
output reserve from each request's `max_tokens`."""

from __future__ import annotations

import ringbound as rb
from ringbound.integrations.litellm import RingboundHook

# Tools whose dropped calls the ledger note keeps, so the model does not run them again.
SIDE_EFFECTS = ["send_email", "create_ticket", "charge_card"]

# Only the policy is ours: every field left at its default (the window, the output reserve,
# the encoding, the token ratio) comes from the model. `RingboundHook()` alone works too.
hook = RingboundHook(rb.AssemblyConfig(side_effect_tools=SIDE_EFFECTS))
