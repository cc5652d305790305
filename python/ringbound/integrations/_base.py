"""What every integration does the same way: an ``Assembler`` whose notes go where the
framework's target accepts them, and the checks of the arguments it was given."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..assembler import Assembler
from ..config import AssemblyConfig
from ..errors import ConfigError
from ..ledgers.side_effects import SideEffectLedger

__all__ = ["assembler_for", "check_ledger"]


def assembler_for(
    config: AssemblyConfig | None,
    default_placement: str,
    *,
    provider: str = "openai_chat",
    allowed: tuple[str, ...] | None = None,
    integration: str,
    **kwargs: Any,
) -> Assembler:
    """An Assembler for ``config`` with ``note_placement`` defaulting to ``default_placement``.

    Raises:
        ConfigError: ``config`` is not an AssemblyConfig, or its ``note_placement`` is not one
            of ``allowed``.
    """
    cfg = config if config is not None else AssemblyConfig()
    if not isinstance(cfg, AssemblyConfig):
        raise ConfigError(
            f"config must be an AssemblyConfig, got {type(cfg).__name__}", key="config"
        )
    if cfg.note_placement is None:
        cfg = dataclasses.replace(cfg, note_placement=default_placement)
    elif allowed is not None and cfg.note_placement not in allowed:
        raise ConfigError(
            f"config `note_placement` must be one of {', '.join(allowed)} for {integration}; "
            f"got {cfg.note_placement!r}",
            key="note_placement",
            reason=f"must be one of {', '.join(allowed)} for {integration}",
        )
    return Assembler(cfg, provider=provider, **kwargs)


def check_ledger(ledger: Any) -> SideEffectLedger | None:
    """``ledger`` if it is a SideEffectLedger or None; ConfigError otherwise."""
    if ledger is not None and not isinstance(ledger, SideEffectLedger):
        raise ConfigError(
            f"ledger must be a ringbound.SideEffectLedger, got {type(ledger).__name__}",
            key="ledger",
            reason="must be a SideEffectLedger",
        )
    return ledger
