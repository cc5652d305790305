"""Every public name is documented: each name of ``ringbound.__all__``, and of the ``__all__``
of every public subpackage (``ringbound.providers``, and any that declares one), appears in
backticks in README.md or a page of docs/ (as ``name``, ``rb.name``, ``name(...)`` or a dotted
path ending in it). The lists are read when the test runs, so a name added anywhere is held to
it."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import ringbound

REPO = Path(__file__).resolve().parent.parent


def public_names() -> list[tuple[str, str]]:
    names = [("ringbound", n) for n in ringbound.__all__]
    for info in pkgutil.iter_modules(ringbound.__path__):
        if info.ispkg and not info.name.startswith("_"):
            module = importlib.import_module(f"ringbound.{info.name}")
            names += [(module.__name__, n) for n in getattr(module, "__all__", ())]
    return names


def documented_text() -> str:
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return "\n".join(p.read_text(encoding="utf-8") for p in pages)


def is_documented(name: str, text: str) -> bool:
    return re.search(rf"`(?:[\w.]+\.)?{re.escape(name)}(?:\b[^`]*)?`", text) is not None


def test_the_names_are_found() -> None:
    names = public_names()
    assert ("ringbound", "Assembler") in names and ("ringbound.providers", "PROVIDERS") in names


@pytest.mark.parametrize(("module", "name"), public_names(), ids=lambda x: x)
def test_the_name_is_documented(module: str, name: str) -> None:
    assert is_documented(name, documented_text()), f"{module}.{name} is in no doc"


def test_the_check_can_fail() -> None:
    text = "Use `rb.count_tokens(messages)` or `ringbound.providers.PROVIDERS`; Assembler alone."
    assert is_documented("count_tokens", text) and is_documented("PROVIDERS", text)
    assert not is_documented("Assembler", text) and not is_documented("count", text)
