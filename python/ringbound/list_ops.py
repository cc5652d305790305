"""The core's writing of a plan applied to the caller's list: one mapping for every provider.

The core writes the request a plan sends (``NativeView.written``) as a list of operations on
the caller's items: an ``int`` keeps the caller's item at that index, the very object; a pair
``(origins, json)`` is a new item made of the caller's items ``origins``: one edited (a tool
result cut or stubbed, images made text, blank text stripped), neighbours merged, or none (the
ledger note). A new item holds the caller's own objects wherever it carries them unchanged (a
merged message's blocks are the caller's block objects, as a hand-written merge would hold
them), and is of the caller's SDK type where it stands for one SDK object that takes it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .errors import InvalidMessageError
from .raw_items import RawItem, RawItems

__all__ = ["Op", "apply_ops", "shared"]

#: One operation: keep the caller's item at this index, or ``(origins, json)``, a new item.
Op = int | tuple[tuple[int, ...], bytes]

#: How far ahead a new list's element is looked for among its sources' elements: a rendering
#: only converts, strips or edits a few of them, and the search stays linear in the list.
_LOOKAHEAD = 8


def apply_ops(
    messages: Sequence[Any], ops: list[Any], fresh: Sequence[int] | None = None
) -> Sequence[Any]:
    """The list the operations describe, the caller's items kept as the same objects. For a
    body's history (``RawItems``) that only keeps items, a view of them written back as slices
    of the body. With ``fresh``, ``ops`` holds the caller's kept objects already (the core put
    them there) and ``fresh`` the positions of the new items, which alone are mapped, in
    place. ``messages`` is read, never changed."""
    if type(messages) is RawItems and all(type(op) is int for op in ops):
        return messages.take(ops)
    try:
        if fresh is None:
            out = [messages[op] if type(op) is int else op for op in ops]
            fresh = [p for p, op in enumerate(ops) if type(op) is not int]
        else:
            out = ops
        for p in fresh:
            out[p] = _new(messages, out[p], out[p - 1] if p > 0 else None)
        return out
    except IndexError:  # another thread shortened the list since the core read it
        reason = "the list of messages changed while it was read"
        raise InvalidMessageError(f"messages: {reason}", index=None, reason=reason) from None


def _new(messages: Sequence[Any], op: tuple[tuple[int, ...], bytes], before: Any) -> Any:
    """The new item ``(origins, json)``, holding the caller's objects it carries unchanged;
    one of nothing of the caller's (a synthesized result, a note) is of the SDK type of the
    item ``before`` it where that type takes it, as the adapters write them."""
    origins, raw = op
    sources = [messages[i] for i in origins]
    value = shared(orjson.loads(raw), sources)
    if not sources:
        return _like(before, value)
    return _like(sources[0], value) if len(sources) == 1 else value


def shared(value: Any, sources: Sequence[Any]) -> Any:
    """``value`` (plain JSON the core wrote from ``sources``) holding the sources' own objects
    where it carries them unchanged: each field's value, and each element of a list field or
    of a list value, matched in order. Only plain dicts and lists are looked into; anything
    else (an SDK object) is matched whole or not at all."""
    plain = [s for s in sources if type(s) is dict or type(s) is list]
    if not plain:
        return value
    if type(value) is list:
        return _aligned(value, [e for s in plain if type(s) is list for e in s])
    if type(value) is not dict:
        return value
    maps = [s for s in plain if type(s) is dict]
    for key, new in value.items():
        olds = [m[key] for m in maps if key in m]
        if type(new) is list:
            value[key] = _aligned(new, [e for o in olds if type(o) is list for e in o])
        elif len(olds) == 1 and _same(new, olds[0]):
            value[key] = olds[0]
    return value


def _aligned(new: list[Any], old: list[Any]) -> list[Any]:
    """``new`` with each element that equals the next unmatched one of ``old`` (looked for a
    few ahead) replaced by it."""
    j = 0
    for k, element in enumerate(new):
        for m in range(j, min(j + _LOOKAHEAD, len(old))):
            if _same(element, old[m]):
                new[k] = old[m]
                j = m + 1
                break
    return new


def _same(plain: Any, obj: Any) -> bool:
    """Whether the caller's ``obj`` is the JSON value ``plain``: compared as values when it is
    plain JSON (a dict, list, string or number), never read through an SDK object's methods."""
    if type(obj) in (dict, list, str, int, float, bool) or obj is None:
        try:
            return bool(plain == obj)
        except RecursionError:
            return False
    return False


def _like(sample: Any, value: Any) -> Any:
    """``value`` as an object of ``sample``'s SDK type when it is one (a pydantic model takes
    its own JSON back), else as it is."""
    if type(sample) is dict or type(sample) is RawItem or not isinstance(value, Mapping):
        return value
    validate = getattr(type(sample), "model_validate", None)
    if not callable(validate):
        return value
    try:
        return validate(value)
    except Exception:  # an SDK type stricter than the provider: the plain dict goes out
        return value


def system_like(value: Any, system: Any, plain: Any) -> Any:
    """The system ``value`` (JSON the core wrote from the caller's ``system``, whose JSON is
    ``plain``) holding the caller's objects it carries unchanged, SDK objects included: an
    element of a list system that equals one of ``plain``'s is the caller's element there (a
    new one, a note, stays plain), and an SDK object's new value is an object of its type."""
    if plain is system:
        return shared(value, [system])
    if type(value) is list and isinstance(system, Sequence) and not isinstance(system, str):
        return _aligned_to(value, plain, system, None)
    copy = getattr(system, "model_copy", None)
    if not callable(copy) or type(value) is not dict or type(plain) is not dict:
        return _like(system, value)
    # An SDK object: a copy whose changed lists hold the caller's elements they keep (a
    # Gemini content's parts), as the adapters write it.
    update = {}
    for key in value.keys() | plain.keys():
        new, old = value.get(key), plain.get(key)
        if new == old:
            continue
        objects = getattr(system, key, None)
        if type(new) is not list or type(old) is not list or not isinstance(objects, Sequence):
            return _like(system, value)
        sample = objects[0] if objects else None
        update[key] = _aligned_to(new, old, objects, sample)
    return copy(update=update)


def _aligned_to(new: list[Any], plain: list[Any], objects: Sequence[Any], sample: Any) -> list[Any]:
    """``new`` (JSON written from ``objects``, whose JSON is ``plain``) with each element that
    equals one of ``plain``'s in order the caller's object there; the others of ``sample``'s
    SDK type where it takes them."""
    own = shared(new, [plain])
    callers = {id(p): obj for p, obj in zip(plain, objects, strict=False)}
    return [callers[id(e)] if id(e) in callers else _like(sample, e) for e in own]
