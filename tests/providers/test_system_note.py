"""The notes joined to a system string, and the provider tables the adapters read: each rule
has one home in the core (``_core.join_system_note``, the ``_core`` tables), and what Python
still holds beside it is checked against it.

``split_system_note`` is in both: the core's system reader takes a system string apart
(``_core.split_system_note``) and so do the façade's notes (``providers.base``, which takes any
``str``); these properties hold the two to each other and to the core's join on arbitrary
texts, separators and markers included, and hold the join to the plain rule it replaces."""

from __future__ import annotations

import gemini_oracle
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from native_readers import bedrock_converse, gemini
from native_readers import openai_responses as responses_reader

import ringbound as rb
from ringbound import _core
from ringbound._core import LEDGER_MARKER, NOTE_SEPARATOR, SUMMARY_MARKER, join_system_note
from ringbound.providers import openai_responses
from ringbound.providers.base import split_system_note

# Texts rich in what a split looks for: separators, newlines and both markers.
_PIECES = st.sampled_from(["\n", "\n\n", NOTE_SEPARATOR, LEDGER_MARKER, SUMMARY_MARKER, " ", "x"])
_TEXT = st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=8).map("".join)
_SURROGATE = st.characters(categories=["Cs"])


def _oracle(*parts: str | None) -> str:
    """The join as the adapters wrote it in Python before it moved to the core."""
    return "\n\n".join(t for t in parts if t)


@given(_TEXT, st.none() | _TEXT, st.none() | _TEXT)
def test_the_cores_join_is_the_adapters_rule(base: str, note: str | None, summary: str | None):
    assert join_system_note(base, note, summary) == _oracle(base, note, summary)
    assert join_system_note(base, note) == _oracle(base, note)
    assert join_system_note(base) == base


def _ambiguous(base: str, note: str | None) -> bool:
    """A system text the split cannot tell apart from a joined one: a caller's text that itself
    opens with a marker or holds one after a separator, or a ledger note that holds the summary
    marker after a separator. The format has no escape for them; no writer produces them."""
    marks = (NOTE_SEPARATOR + LEDGER_MARKER, NOTE_SEPARATOR + SUMMARY_MARKER)
    if base.startswith((LEDGER_MARKER, SUMMARY_MARKER)) or any(m in base for m in marks):
        return True
    return note is not None and NOTE_SEPARATOR + SUMMARY_MARKER in note


@given(_TEXT, st.none() | _TEXT, st.none() | _TEXT)
def test_the_split_inverts_the_cores_join(base: str, ledger: str | None, summary: str | None):
    note = None if ledger is None else LEDGER_MARKER + ledger
    summary_note = None if summary is None else SUMMARY_MARKER + summary
    assume(not _ambiguous(base, note))
    joined = join_system_note(base, note, summary_note)
    assert split_system_note(joined) == (base, note, summary_note)
    # Joining what the split gave is the same text again.
    assert join_system_note(*split_system_note(joined)) == joined


@given(_TEXT)
def test_the_cores_split_is_the_facades(text: str) -> None:
    """Ambiguous texts included: what the core counts as the caller's is what the façade
    reads as the caller's."""
    assert _core.split_system_note(text) == split_system_note(text)


@given(_TEXT, _SURROGATE, st.integers(0, 2), st.integers(0, 8))
def test_a_lone_surrogate_anywhere_is_a_typed_error(text: str, lone: str, which: int, at: int):
    bad = text[:at] + lone + text[at:]
    parts: list[str | None] = ["base", LEDGER_MARKER + " n", SUMMARY_MARKER + " s"]
    parts[which] = bad
    with pytest.raises(rb.InvalidMessageError) as e:
        join_system_note(*parts)
    assert e.value.index is None
    assert ("system", "ledger note", "summary note")[which] in str(e.value)


@pytest.mark.parametrize("bad", [1, b"text", ["text"], object()])
def test_a_part_that_is_not_a_string_is_a_typed_error(bad: object) -> None:
    for parts in ((bad,), ("base", bad), ("base", None, bad)):
        with pytest.raises(rb.InvalidMessageError, match="must be a string"):
            join_system_note(*parts)  # type: ignore[arg-type]


def test_a_str_subclass_is_joined_as_the_text_it_holds() -> None:
    class Loud(str):
        def __str__(self) -> str:
            return "LOUD"

    assert join_system_note(Loud("base"), Loud(LEDGER_MARKER)) == "base\n\n" + LEDGER_MARKER


def test_the_adapters_read_the_cores_tables() -> None:
    """No copy to drift: each Python table is built from the core's, element for element (the
    readers' and Gemini's signature fields, in the tests' oracles)."""
    assert gemini._DATA_FIELDS == dict(_core.GEMINI_DATA_FIELDS)
    assert set(gemini._SNAKE_TO_CAMEL.items()) == {(s, c) for c, s in _core.GEMINI_DATA_FIELDS}
    assert gemini._META_FIELDS == frozenset(_core.GEMINI_META_FIELDS)
    assert gemini_oracle._SIGNATURE_FIELDS is _core.GEMINI_SIGNATURE_FIELDS
    assert set(_core.GEMINI_SIGNATURE_FIELDS) <= set(_core.GEMINI_META_FIELDS)
    assert openai_responses.ITEM_TYPES is _core.RESPONSES_ITEM_TYPES
    assert bedrock_converse._USER_BLOCKS == frozenset(_core.BEDROCK_USER_BLOCKS)
    assert bedrock_converse._ASSISTANT_BLOCKS == frozenset(_core.BEDROCK_ASSISTANT_BLOCKS)
    assert bedrock_converse._RESULT_BLOCKS == frozenset(_core.BEDROCK_RESULT_BLOCKS)


def test_the_responses_reader_reads_every_item_type_the_core_lists() -> None:
    """The Python reader (the oracle) dispatches on its own families; every other type the
    core lists falls to the hosted tools' reading. So the core's list must be exactly the
    reader's families, the core's hosted tools and the four items read apart: a family added
    on one side only fails here."""
    r = responses_reader
    expected = (
        "message",
        "reasoning",
        *r._BY_CALL,
        *r._BY_OUTPUT,
        *_core.RESPONSES_HOSTED,
        "compaction",
        "compaction_trigger",
    )
    assert expected == _core.RESPONSES_ITEM_TYPES
