"""The reconciled token account of one session: what ringbound estimated, what the provider's
count API said, what the responses reported and billed (input, cached, cache-write, output),
what the summarizer cost and how often the provider compacted server-side. One record, so the
three views of the same tokens can be compared line by line."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..caller_values import plain_dict, plain_int, plain_str, shown
from ..errors import ConfigError
from .usage import Usage, read_usage

__all__ = ["TokenAccount"]


@dataclass(frozen=True)
class TokenAccount:
    """Totals over a session, in tokens (each a sum over the requests it counts).

    Attributes:
        assemblies: Assemblies recorded.
        estimated: ringbound's estimate of the assembled requests (``tokens_after``).
        checked: Assemblies whose request the provider's count API checked.
        checked_estimated: The estimate of those requests ...
        provider_counted: ... and what the provider counted for them.
        counter_failures: Checks that failed or timed out (the estimate was used).
        tightened: Assemblies tightened because the provider counted them over budget.
        responses: Responses whose usage was reported (the summarizer's excluded).
        reported_prompt: The prompt size those responses reported (requests as sent).
        input: Input billed at the full rate.
        cached_input: Input read from the provider's cache.
        cache_write: Input written to the provider's cache.
        output: Output billed.
        compaction_iterations: Server-side compactions (Anthropic ``usage.iterations``).
        summarizer_calls: Calls the summary stage made.
        summarizer_input: Input the summarizer's responses reported (when given with
            ``observe_usage(..., summarizer=True)``) ...
        summarizer_output: ... and their output.
    """

    assemblies: int = 0
    estimated: int = 0
    checked: int = 0
    checked_estimated: int = 0
    provider_counted: int = 0
    counter_failures: int = 0
    tightened: int = 0
    responses: int = 0
    reported_prompt: int = 0
    input: int = 0
    cached_input: int = 0
    cache_write: int = 0
    output: int = 0
    compaction_iterations: int = 0
    summarizer_calls: int = 0
    summarizer_input: int = 0
    summarizer_output: int = 0

    def with_usage(self, usage: Usage, *, summarizer: bool = False) -> TokenAccount:
        """This account plus one response's usage (a ``Usage``, or what ``read_usage``
        reads)."""
        if not isinstance(usage, Usage):
            usage = read_usage(usage)
        if summarizer:
            return dataclasses.replace(
                self,
                summarizer_input=self.summarizer_input
                + usage.input_tokens
                + usage.cached_tokens
                + usage.cache_write_tokens,
                summarizer_output=self.summarizer_output + usage.output_tokens,
            )
        return dataclasses.replace(
            self,
            responses=self.responses + 1,
            reported_prompt=self.reported_prompt + (usage.prompt_tokens or 0),
            input=self.input + usage.input_tokens,
            cached_input=self.cached_input + usage.cached_tokens,
            cache_write=self.cache_write + usage.cache_write_tokens,
            output=self.output + usage.output_tokens,
            compaction_iterations=self.compaction_iterations + usage.compaction_iterations,
        )

    def with_assembly(self, report: Any) -> TokenAccount:
        """This account plus one assembly's report."""
        check = getattr(report, "provider_count", None)
        summary = getattr(report, "summary", None)
        changes: dict[str, int] = {
            "assemblies": self.assemblies + 1,
            "estimated": self.estimated + report.tokens_after,
            "summarizer_calls": self.summarizer_calls + (summary.calls if summary else 0),
        }
        if check is not None:
            if check.tokens is not None:
                changes["checked"] = self.checked + 1
                changes["checked_estimated"] = self.checked_estimated + report.tokens_after
                changes["provider_counted"] = self.provider_counted + check.tokens
            if check.failed:
                changes["counter_failures"] = self.counter_failures + 1
            if check.rechecks:
                changes["tightened"] = self.tightened + 1
        return dataclasses.replace(self, **changes)

    @property
    def provider_ratio(self) -> float | None:
        """Provider-counted over estimated tokens of the checked requests (None before any)."""
        return self.provider_counted / self.checked_estimated if self.checked_estimated else None

    def to_dict(self) -> dict[str, int]:
        """Plain data, ready for JSON."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TokenAccount:
        """Rebuild from :meth:`to_dict` output; ConfigError when malformed."""
        names = {f.name for f in dataclasses.fields(cls)}
        # Read as stored: the caller's own mapping methods, keys and counts may raise.
        plain = plain_dict(data)
        keys = [plain_str(k) for k in plain or ()]
        if plain is None or not all(k in names for k in keys):
            raise ConfigError("token account must map its field names to counts", key="account")
        counts = {}
        for k, v in zip(keys, plain.values(), strict=True):
            count = plain_int(v)
            if count is None or count < 0:
                raise ConfigError(f"token account {k} must be a count, got {shown(v)}", key=k)
            counts[k] = count
        return cls(**counts)
