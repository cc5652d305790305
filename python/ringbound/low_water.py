"""Where a cache-stable compaction plans: down to the low-water mark with the middle's stages
only. The stages that degrade the protected part (``truncate_protected_results``,
``shrink_recent``, dropping the tools schema) exist so that a request that cannot otherwise fit
the budget is served; spending them to reach an optional mark below the budget loses what the
caller protected, and makes a cut the next turn cannot make again (a replay refuses to drop
or rewrite a protected message). So the compaction goes to the mark when the middle can take
it there, else as low as the middle goes, and only when that is still over the budget does it
plan at the budget with every stage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ._core import Plan
from .config import AssemblyConfig
from .errors import BudgetExceededError

__all__ = ["DEGRADING", "lowest", "middle_only"]

#: Stages that degrade the protected part once the middle is exhausted.
DEGRADING = ("truncate_protected_results", "shrink_recent")


def middle_only(cfg: AssemblyConfig) -> AssemblyConfig:
    """The policy without the stages that degrade the protected part or drop the tools."""
    return dataclasses.replace(
        cfg,
        stages=tuple(s for s in cfg.stages if s not in DEGRADING),
        on_still_over_budget="fail_closed",
    )


def lowest(
    plan: Callable[[Any], Plan],
    target: int,
    budget: int,
    low_for: Callable[[int], Any],
    core_for: Callable[[int], Any],
) -> tuple[Plan, int, Callable[[int], Any]]:
    """The compaction's plan, the budget it was planned at, and the core configs for planning
    it again (a rendering tightened, a summary's room reserved).

    ``plan`` makes a plan from a core config; ``low_for`` and ``core_for`` give the core
    config of a budget without and with the degrading stages.

    Raises:
        BudgetExceededError: Not even every stage fits the request into ``budget``.
    """
    try:
        return plan(low_for(target)), target, low_for
    except BudgetExceededError as e:
        least = e.tokens
    if target < least <= budget:
        # What the middle's stages cannot go below: the protected part (and the room asked
        # for); a plan there is the lowest the request gets without degrading it.
        try:
            return plan(low_for(least)), least, low_for
        except BudgetExceededError:
            pass
    return plan(core_for(budget)), budget, core_for
