"""The core's config (``_core.CoreConfig``) of an ``AssemblyConfig``: what the Rust core plans
and counts with. The assembler makes one per assembler and budget; reading or counting a
request without planning it uses the default config's (``default_core``)."""

from __future__ import annotations

import functools

from . import _core
from .config import AssemblyConfig

__all__ = ["core_config", "default_core"]


def core_config(
    cfg: AssemblyConfig, image_formula: str = "openai", token_ratio: float = 1.0
) -> _core.CoreConfig:
    """The core config of ``cfg``, counting images by ``image_formula`` and scaling counts by
    ``token_ratio`` (the provider's, resolved by the assembler)."""
    return _core.CoreConfig(
        budget=cfg.budget,
        recent_tool_rings=cfg.recent_tool_rings,
        recent_user_turns=cfg.recent_user_turns,
        pin_first_user_message="first_user_message" in cfg.pin,
        pin_side_effect_ledger="side_effect_ledger" in cfg.pin,
        pin_security_system_prompt="security_system_prompt" in cfg.pin,
        short_error_result_tokens=cfg.short_error_result_tokens,
        max_held_error_rings=cfg.max_held_error_rings,
        side_effect_tools=list(cfg.side_effect_tools),
        ledger_fields={k: list(v) for k, v in cfg.ledger_fields.items()},
        stages=[s for s in cfg.stages if s != "summarize"],
        drop_tools_schema=cfg.on_still_over_budget == "drop_tools_schema_then_fail",
        synthesize_missing_results=cfg.on_pairing_error == "synthesize_error_results",
        encoding=cfg.encoding,
        tokenizer_backend=cfg.tokenizer_backend,
        max_messages=cfg.max_messages,
        max_request_bytes=cfg.max_request_bytes,
        image_formula=image_formula,
        token_ratio=token_ratio,
        max_tool_result_tokens=cfg.max_tool_result_tokens,
        min_result_tokens=cfg.min_result_tokens,
        min_recent_tool_rings=cfg.min_recent_tool_rings,
        min_recent_user_turns=cfg.min_recent_user_turns,
    )


@functools.cache
def default_core() -> _core.CoreConfig:
    """The core config of the default ``AssemblyConfig``: what reading a request to look at it
    (never to plan it) counts with."""
    return core_config(AssemblyConfig())
