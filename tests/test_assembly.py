"""``ringbound.assembly``: the contract the stages around the core hold the assembler to, and the
one request object they pass on."""

from __future__ import annotations

import dataclasses
import typing

import pytest

import ringbound as rb
from ringbound.assembly import Assembles, AssemblyInputs


def _members(protocol: type) -> set[str]:
    names = set(typing.get_type_hints(protocol))
    names |= {n for n, v in vars(protocol).items() if callable(v) and not n.startswith("__")}
    return names


@pytest.mark.parametrize(
    "asm",
    [
        pytest.param(rb.Assembler(), id="plain"),
        pytest.param(rb.Assembler(provider=None), id="detecting"),
        pytest.param(rb.Assembler(provider="anthropic"), id="anthropic"),
        pytest.param(rb.Assembler(rb.AssemblyConfig(token_ratio="auto")), id="gated"),
    ],
)
def test_an_assembler_has_every_part_the_stages_read(asm: rb.Assembler) -> None:
    # The stages name the assembler by the protocol alone: a part it declares that the
    # Assembler lacks would fail only on the path that reads it.
    missing = sorted(n for n in _members(Assembles) if not hasattr(asm, n))
    assert missing == []
    assert {"config", "provider", "_flow", "_entry", "_variants"} <= _members(Assembles)


def test_the_variants_are_made_by_the_assemblers_own_class() -> None:
    class Mine(rb.Assembler):
        pass

    asm = Mine(provider=None)
    body = b'{"model": "m", "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}'
    assert asm.assemble_body(body).provider == "gemini"
    assert all(type(v) is Mine for v in asm._variants._made.values())
    assert asm._variants._made


class _Hostile:
    """A caller's value whose comparison and hash raise."""

    def __eq__(self, other: object) -> bool:
        raise AssertionError("compared")

    def __hash__(self) -> int:
        raise AssertionError("hashed")

    def __iter__(self) -> typing.Iterator[int]:
        return iter(())


def test_inputs_are_frozen_and_never_compare_the_callers_values() -> None:
    pinned = _Hostile()
    inputs = AssemblyInputs([], pinned=pinned)  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        inputs.tighten = 1  # type: ignore[misc]
    moved = dataclasses.replace(inputs, stateful=True)
    assert moved.pinned is pinned and moved.stateful and not inputs.stateful
    assert inputs != moved and inputs == inputs
    hash(inputs)
