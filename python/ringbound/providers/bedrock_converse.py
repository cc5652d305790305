"""Amazon Bedrock Converse: messages of ``{role, content: [blocks]}`` with a top-level ``system``
block list. Calls are ``toolUse`` blocks of an assistant turn, answered by ``toolResult`` blocks
in the very next user turn; the conversation starts with a user turn and roles alternate.

The core reads the request, checks Bedrock's rules and writes the request a plan describes
(``rust/src/providers/bedrock_converse``); this module reads what the core needs from Python.
The Python rendering it had is the tests' oracle for the core's writing
(``tests/providers/bedrock_converse_oracle.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._core import LEDGER_MARKER
from ..errors import InvalidMessageError
from .base import NativeAdapter, is_summary_note

__all__ = ["ADAPTER", "BedrockConverseAdapter"]


@dataclass
class _System:
    texts: list[str]
    notes: list[str]
    summaries: list[str] = field(default_factory=list)


def _invalid(i: int | None, reason: str) -> InvalidMessageError:
    """A bad message ``i``, or (None) a bad ``system`` or ``tools``, which ``reason`` names."""
    text = reason if i is None else f"messages[{i}]: {reason}"
    return InvalidMessageError(text, index=i, reason=reason)


def _type(v: Any) -> str:
    return type(v).__name__


def _member(i: int | None, block: Any, where: str) -> tuple[str, Any]:
    """The one member a Bedrock union block sets (keys set to None count as absent)."""
    if not isinstance(block, Mapping):
        raise _invalid(i, f"{where} must be an object, got {_type(block)}")
    keys = [k for k, v in block.items() if v is not None]
    if len(keys) != 1:
        raise _invalid(i, f"{where} must set exactly one block type, got {sorted(map(str, keys))}")
    return keys[0], block[keys[0]]


def _str(i: int | None, value: Any, where: str, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise _invalid(i, f"{where} must be a string, got {_type(value)}")
    if not empty and not value:
        raise _invalid(i, f"{where} is empty")
    # A str subclass is read as its characters: its own __str__ or __format__ may raise
    # where an id is quoted in an issue.
    return str.__str__(value)


def _obj(i: int | None, value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _invalid(i, f"{where} must be an object, got {_type(value)}")
    return value


def _list(i: int | None, value: Any, where: str) -> Sequence[Any]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise _invalid(i, f"{where} must be a list, got {_type(value)}")
    return value


def _check_payload(i: int | None, source: Mapping[str, Any], where: str) -> None:
    """The ``bytes`` of a media source: raw bytes (boto3) or base64 text (JSON payloads)."""
    data = source["bytes"]
    if not isinstance(data, (bytes, bytearray, memoryview)):
        _str(i, data, f"{where}.source.bytes")


def _check_image(i: int | None, image: Any, where: str) -> None:
    """An image block: a format, and bytes or an S3 location."""
    image = _obj(i, image, where)
    _str(i, image.get("format"), f"{where}.format", empty=False)
    kind, source = _member(i, image.get("source"), f"{where}.source")
    if kind == "bytes":
        _check_payload(i, image["source"], where)
    elif kind == "s3Location":
        _str(i, _obj(i, source, f"{where}.source.s3Location").get("uri"), f"{where}.uri")
    else:
        raise _invalid(i, f"{where}.source must be bytes or s3Location, got {kind}")


def _guard_text(i: int | None, value: Any, where: str) -> str | None:
    """The text of a ``guardContent`` block; None for a guarded image."""
    kind, inner = _member(i, value, where)
    if kind == "text":
        text = _obj(i, inner, f"{where}.text").get("text")
        return _str(i, text, f"{where}.text.text")
    if kind == "image":
        _check_image(i, inner, f"{where}.image")
        return None
    raise _invalid(i, f"{where} has unknown type {kind}")


def _system(system: Any) -> _System:
    """The caller's system texts, and the ledger and summary notes an earlier assembly
    appended as blocks."""
    out = _System([], [])
    if system is None:
        return out
    for b, block in enumerate(_list(None, system, "system")):
        kind, value = _member(None, block, f"system[{b}]")
        if kind == "text":
            text = _str(None, value, f"system[{b}].text")
            if text.startswith(LEDGER_MARKER):
                out.notes.append(text)
            elif is_summary_note(text):
                out.summaries.append(text)
            else:
                out.texts.append(text)
        elif kind == "guardContent":
            text = _guard_text(None, value, f"system[{b}]")
            if text is None:
                raise _invalid(None, f"system[{b}] is a guarded image; system takes text")
            out.texts.append(text)
        elif kind != "cachePoint":
            raise _invalid(None, f"system[{b}] has type {kind}; system takes text blocks")
    return out


class BedrockConverseAdapter(NativeAdapter):
    """Amazon Bedrock Converse (``bedrock_converse``).

    Example:
        >>> from ringbound.providers.bedrock_converse import ADAPTER
        >>> messages = [
        ...     {"role": "user", "content": [{"text": "Weather in Paris?"}]},
        ...     {"role": "assistant", "content": [{"toolUse": {
        ...         "toolUseId": "t1", "name": "weather", "input": {"city": "Paris"}}}]},
        ... ]
        >>> [(i.kind, i.index) for i in ADAPTER.validate(messages)]
        [('missing_result', 1)]
    """

    key = "bedrock_converse"
    #: Converse mostly serves Claude; its images are priced by Anthropic's published formula.
    image_formula = "anthropic"
    #: Claude tokens per o200k token: Claude 3.5 Sonnet's tokenizer gives 16% (English), 21%
    #: (math) and 30% (Python code) more tokens than GPT-4o's on the same text; the largest
    #: measured figure is the default (see docs/providers/bedrock_converse.md).
    default_token_ratio = 1.3
    items_field = "messages"
    raw_bytes = True

    def system_texts(self, system: Any) -> list[list[str]]:
        """The system as the core counts it: the caller's texts (an empty message when there
        are none: the first turn holds on to it), then each ledger note and summary note."""
        instructions = _system(system)
        return [instructions.texts] + [[t] for t in instructions.notes + instructions.summaries]

    def tools_to_openai(self, tools: Sequence[Any]) -> list[dict[str, Any]]:
        """``toolConfig.tools`` entries (``toolSpec``; ``cachePoint`` entries skipped) as
        OpenAI function tools."""
        out: list[dict[str, Any]] = []
        for t, tool in enumerate(_list(None, tools, "tools")):
            kind, spec = _member(None, tool, f"tools[{t}]")
            if kind == "cachePoint":
                continue
            if kind != "toolSpec":
                raise _invalid(None, f"tools[{t}] has type {kind}; expected toolSpec or cachePoint")
            if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
                raise _invalid(None, f"tools[{t}].toolSpec needs a string `name`")
            schema = spec.get("inputSchema")
            parameters = schema.get("json") if isinstance(schema, Mapping) else None
            if not isinstance(parameters, Mapping):
                raise _invalid(None, f"tools[{t}].toolSpec.inputSchema.json must be an object")
            function: dict[str, Any] = {"name": spec["name"], "parameters": dict(parameters)}
            if spec.get("description") is not None:
                if not isinstance(spec["description"], str):
                    raise _invalid(None, f"tools[{t}].toolSpec.description must be a string")
                function["description"] = spec["description"]
            out.append({"type": "function", "function": function})
        return out


#: The adapter ``ringbound.providers.adapter("bedrock_converse")`` returns.
ADAPTER = BedrockConverseAdapter()
