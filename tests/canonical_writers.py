"""The Python writers of OpenAI Chat messages in each provider's shape, kept as a differential
oracle for the core's writer (``rb.translate(source="openai_chat", target=...)``).

The package writes with the core only (one home for each provider rule, issue 33); these are
the writers the adapters had before, an independent second reading of the same rules. Tests
that need a native session build it here, so what they check does not come from the code under
test, and ``tests/test_canonical_writers.py`` holds the two writers to each other.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from native_readers.anthropic import _invalid as _a_invalid
from native_readers.anthropic import _is_note as _a_is_note
from native_readers.bedrock_converse import _invalid as _b_invalid
from native_readers.bedrock_converse import _list as _b_list
from native_readers.bedrock_converse import _obj as _b_obj
from native_readers.bedrock_converse import _str as _b_str
from native_readers.openai_responses import _CUSTOM as _R_CUSTOM
from native_readers.openai_responses import _FUNCTION as _R_FUNCTION
from native_readers.openai_responses import _Family as _RFamily
from native_readers.openai_responses import _invalid as _r_invalid

from ringbound.errors import InvalidMessageError
from ringbound.providers.base import is_summary_note, join_system_note

__all__ = ["BRIDGE_TEXT", "GEMINI_OPENING_TEXT", "OPENING_TEXT", "from_canonical"]

#: Bedrock: the assistant turn put between tool results and a user turn (Bedrock refuses a
#: user text turn right after a tool-result turn unless they are merged, and they may not be).
BRIDGE_TEXT = "(tool results received)"
#: Bedrock: the user turn put before an assistant turn that opens the conversation.
OPENING_TEXT = "(session start)"
#: Gemini: the user turn put before a model turn that opens the conversation.
GEMINI_OPENING_TEXT = "(The session starts here.)"

#: What Bedrock accepts as a toolUseId (API reference, ToolUseBlock).
_B_TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def from_canonical(provider: str, messages: Sequence[dict[str, Any]]) -> tuple[list[Any], Any]:
    """OpenAI Chat ``messages`` in ``provider``'s shape: ``(messages, system)``. OpenAI Chat
    itself is returned as given (its system stays in the messages)."""
    if provider == "openai_chat":
        return list(messages), None
    return _WRITERS[provider](messages)


def _looks_like_error(text: str) -> bool:
    """The core's reading of an OpenAI tool message as an error report."""
    head = text.lstrip()[:40].lower()
    return head.startswith(("error", "traceback (most recent call last)", "exception"))


def anthropic(messages: Sequence[dict[str, Any]]) -> tuple[list[Any], Any]:
    """OpenAI Chat messages as an Anthropic request ``(messages, system)``.

    Leading system/developer texts become the system (a ledger note and a summary note
    joined as ``split_system_note`` reads them back); later ones become user text. Tool
    results become ``tool_result`` blocks opening the next user message; same-role
    neighbours are merged so roles alternate. Call ids are made to match
    ``[a-zA-Z0-9_-]+`` and unique across the conversation (OpenAI lets an id recur in a
    later turn, Anthropic does not); arguments that are not a JSON object travel as
    ``{"arguments": "<the raw string>"}``.

    Raises:
        InvalidMessageError: A message has no Anthropic equivalent (audio input).
    """
    system_texts: list[str] = []
    note: str | None = None
    summary: str | None = None
    out: list[dict[str, Any]] = []
    taken: set[str] = set()
    renamed: dict[str, str] = {}
    leading = True
    for i, m in enumerate(messages):
        role = m.get("role")
        if role in ("system", "developer"):
            text = _a_chat_text(m.get("content"))
            if _a_is_note(text):
                note = text
            elif is_summary_note(text):
                summary = text
            elif leading:
                system_texts.append(text)
            else:
                _a_append(out, "user", [{"type": "text", "text": text}])
            continue
        leading = False
        if role == "assistant":
            blocks = _a_chat_blocks(i, m.get("content"))
            if isinstance(m.get("refusal"), str):
                blocks.append({"type": "text", "text": m["refusal"]})
            renamed = {}
            for call in m.get("tool_calls") or ():
                cid = _a_anthropic_id(call["id"], taken)
                renamed.setdefault(call["id"], cid)
                fn = call.get("function") or call.get("custom") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": cid,
                        "name": fn.get("name", ""),
                        "input": _a_input(fn.get("arguments", fn.get("input", ""))),
                    }
                )
            _a_append(out, "assistant", blocks)
        elif role == "tool":
            rid = renamed.get(m.get("tool_call_id"), _a_id_chars(m.get("tool_call_id") or ""))
            content = m.get("content")
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": rid}
            result["content"] = content if isinstance(content, str) else _a_chat_blocks(i, content)
            _a_append(out, "user", [result])
        else:
            _a_append(out, "user", _a_chat_blocks(i, m.get("content")))
    system = join_system_note("\n\n".join(system_texts), note, summary) or None
    return out, system


def _a_chat_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or () if isinstance(p, dict))


def _a_chat_blocks(i: int, content: Any) -> list[dict[str, Any]]:
    """OpenAI Chat content parts as Anthropic blocks."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if kind in ("text", "refusal"):
            out.append({"type": "text", "text": part.get(kind, "")})
        elif kind == "image_url":
            url = part["image_url"]["url"]
            match = re.match(r"data:([^;,]+);base64,(.*)", url, re.DOTALL)
            source = (
                {"type": "base64", "media_type": match[1], "data": match[2]}
                if match
                else {"type": "url", "url": url}
            )
            out.append({"type": "image", "source": source})
        elif kind == "file":
            file = part.get("file") or {}
            data = file.get("file_data", "")
            match = re.match(r"data:([^;,]+);base64,(.*)", data, re.DOTALL)
            if match:
                source = {"type": "base64", "media_type": match[1], "data": match[2]}
            else:
                source = {"type": "file", "file_id": file.get("file_id", "")}
            out.append({"type": "document", "source": source})
        else:
            raise _a_invalid(i, f"content part of type {kind!r} has no Anthropic equivalent")
    return out


def _a_id_chars(raw: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_-]", "_", raw) or "toolu"


def _a_anthropic_id(raw: str, taken: set[str]) -> str:
    base = _a_id_chars(raw)
    cid, n = base, 1
    while cid in taken:
        n += 1
        cid = f"{base}_{n}"
    taken.add(cid)
    return cid


def _a_input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        value = None
    return value if isinstance(value, dict) else {"arguments": arguments}


def _a_append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Adds blocks as a message of ``role``, merged into the last one when it has that role."""
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": list(blocks)})


def bedrock_converse(messages: Sequence[dict[str, Any]]) -> tuple[list[Any], Any]:
    """OpenAI Chat messages in Bedrock's shape. Every system/developer message goes to the
    top-level ``system`` (Bedrock has no instruction messages); consecutive tool messages
    become one tool-result turn; same-role neighbours are merged. Where OpenAI Chat allows
    what Bedrock refuses, a fixed short turn is added: ``OPENING_TEXT`` from the user before
    an assistant turn that opens the conversation, ``BRIDGE_TEXT`` from the assistant
    between tool results and a user turn. Ids Bedrock would refuse get a stable hash."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        m = _b_obj(i, m, "message")
        role = m.get("role")
        if role in ("system", "developer"):
            system.extend({"text": t} for t in _b_chat_texts(i, m.get("content")))
            continue
        if role == "user":
            blocks = _b_chat_user_blocks(i, m.get("content"))
        elif role == "assistant":
            blocks = _b_chat_assistant_blocks(i, m)
        elif role == "tool":
            blocks = [_b_chat_tool_result(i, m)]
            role = "user"
        else:
            raise _b_invalid(i, f"cannot convert role {role!r}")
        if not out and role == "assistant":
            out.append({"role": "user", "content": [{"text": OPENING_TEXT}]})
        _b_push(out, str(role), blocks)
    return out, (system or None)


def _b_tool_use_id(call_id: str) -> str:
    if _B_TOOL_USE_ID.fullmatch(call_id):
        return call_id
    return "tooluse_" + hashlib.sha256(call_id.encode()).hexdigest()[:40]


def _b_chat_texts(i: int, content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    texts = []
    for p, part in enumerate(_b_list(i, content, "`content`")):
        part = _b_obj(i, part, f"content[{p}]")
        if part.get("type") not in ("text", "refusal"):
            raise _b_invalid(i, f"content[{p}] of type {part.get('type')!r} is not text")
        texts.append(_b_str(i, part.get(part["type"]), f"content[{p}].{part['type']}"))
    return texts


_B_DATA_URL = re.compile(r"data:image/([a-z0-9.+-]+);base64,(.*)", re.DOTALL)


def _b_chat_user_blocks(i: int, content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}]
    blocks: list[dict[str, Any]] = []
    for p, part in enumerate(_b_list(i, content, "`content`")):
        part = _b_obj(i, part, f"content[{p}]")
        if part.get("type") == "text":
            blocks.append({"text": _b_str(i, part.get("text"), f"content[{p}].text")})
        elif part.get("type") == "image_url":
            url = _b_str(i, _b_obj(i, part.get("image_url"), "image_url").get("url"), "url")
            match = _B_DATA_URL.fullmatch(url)
            if match:
                fmt = "jpeg" if match[1] == "jpg" else match[1]
                blocks.append({"image": {"format": fmt, "source": {"bytes": match[2]}}})
            elif url.startswith("s3://"):
                blocks.append({"image": {"format": "png", "source": {"s3Location": {"uri": url}}}})
            else:
                blocks.append({"text": f"[image: {url}]"})
        else:
            raise _b_invalid(i, f"content[{p}] of type {part.get('type')!r} cannot be converted")
    return blocks


def _b_chat_assistant_blocks(i: int, m: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = m.get("content")
    blocks: list[dict[str, Any]] = [
        {"text": t} for t in ([] if content is None else _b_chat_texts(i, content)) if t
    ]
    for c, call in enumerate(m.get("tool_calls") or ()):
        call = _b_obj(i, call, f"tool_calls[{c}]")
        kind = call.get("type") or "function"
        body = _b_obj(i, call.get(kind), f"tool_calls[{c}].{kind}")
        raw = body.get("arguments" if kind == "function" else "input")
        try:
            value = orjson.loads(raw) if kind == "function" else None
        except (TypeError, orjson.JSONDecodeError):
            value = None
        payload = value if isinstance(value, dict) else {"input": raw}
        call_id = _b_str(i, call.get("id"), f"tool_calls[{c}].id", empty=False)
        name = _b_str(i, body.get("name"), f"tool_calls[{c}].name", empty=False)
        blocks.append(
            {"toolUse": {"toolUseId": _b_tool_use_id(call_id), "name": name, "input": payload}}
        )
    return blocks


def _b_chat_tool_result(i: int, m: Mapping[str, Any]) -> dict[str, Any]:
    texts = _b_chat_texts(i, m.get("content"))
    result: dict[str, Any] = {
        "toolUseId": _b_tool_use_id(_b_str(i, m.get("tool_call_id"), "tool_call_id", empty=False)),
        "content": [{"text": t} for t in texts],
    }
    if texts and _looks_like_error(texts[0]):
        result["status"] = "error"
    return {"toolResult": result}


def _b_is_result(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("toolResult") is not None


def _b_push(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Appends a turn, merging it into a same-role turn before it where Bedrock allows."""
    if out and out[-1]["role"] == role:
        before = any(_b_is_result(b) for b in out[-1]["content"])
        now = any(_b_is_result(b) for b in blocks)
        if role == "assistant" or before == now:
            out[-1]["content"].extend(blocks)
            return
        out.append({"role": "assistant", "content": [{"text": BRIDGE_TEXT}]})
    out.append({"role": role, "content": list(blocks)})


def gemini(messages: Sequence[dict[str, Any]]) -> tuple[list[Any], Any]:
    """Canonical messages as Gemini contents: leading system/developer messages become the
    system instruction, later ones user text; same-role neighbours share one content (a
    reply and the calls after it are one model turn; results and the user text after them
    one user turn); calls keep their ids, so responses pair by id. Gemini needs a user turn
    first: a conversation that opens with the model (a scheduled run) gets a user turn
    with ``GEMINI_OPENING_TEXT`` before it."""
    system_parts: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    i = 0
    while i < len(messages) and messages[i].get("role") in ("system", "developer"):
        system_parts.append({"text": _g_canonical_text(messages[i].get("content"))})
        i += 1
    for m in messages[i:]:
        role = m.get("role")
        if role in ("system", "developer"):
            native, parts = "user", [{"text": _g_canonical_text(m.get("content"))}]
        elif role == "user":
            native, parts = "user", _g_user_parts(m.get("content"))
        elif role == "assistant":
            native, parts = "model", _g_model_parts(m, names)
        elif role == "tool":
            native, parts = "user", [_g_response_part(m, names)]
        else:
            raise InvalidMessageError(f"unknown canonical role {role!r}", reason="role")
        if not contents and native != "user":
            contents.append({"role": "user", "parts": [{"text": GEMINI_OPENING_TEXT}]})
        if contents and contents[-1]["role"] == native:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": native, "parts": parts or [{"text": ""}]})
    return contents, ({"parts": system_parts} if system_parts else None)


def _g_canonical_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return ""


def _g_data_url(url: str) -> tuple[str, str] | None:
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return head, data


def _g_user_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}]
    parts: list[dict[str, Any]] = []
    for p in content or []:
        kind = p.get("type")
        if kind == "text":
            parts.append({"text": p.get("text", "")})
        elif kind == "image_url":
            url = p["image_url"]["url"]
            inline = _g_data_url(url)
            if inline:
                parts.append({"inlineData": {"mimeType": inline[0], "data": inline[1]}})
            else:
                parts.append({"fileData": {"mimeType": "image/jpeg", "fileUri": url}})
        elif kind == "input_audio":
            audio = p["input_audio"]
            mime = f"audio/{audio.get('format', 'wav')}"
            parts.append({"inlineData": {"mimeType": mime, "data": audio.get("data", "")}})
        elif kind == "file":
            file = p["file"]
            inline = _g_data_url(file.get("file_data", ""))
            if inline:
                parts.append({"inlineData": {"mimeType": inline[0], "data": inline[1]}})
            else:
                uri = file.get("file_id", "")
                parts.append({"fileData": {"mimeType": "application/octet-stream", "fileUri": uri}})
    return parts


def _g_model_parts(m: Mapping[str, Any], names: dict[str, str]) -> list[dict[str, Any]]:
    content = m.get("content")
    parts: list[dict[str, Any]] = []
    if isinstance(content, str):
        parts.append({"text": content})
    elif isinstance(content, list):
        parts.extend({"text": p.get("text", p.get("refusal", ""))} for p in content)
    for call in m.get("tool_calls") or ():
        function = call.get("function") or call.get("custom") or {}
        raw = function.get("arguments", function.get("input", ""))
        try:
            args = json.loads(raw)
        except (TypeError, ValueError):
            args = None
        if not isinstance(args, dict):
            args = {"arguments": raw}
        names[call["id"]] = function.get("name", "")
        parts.append({"functionCall": {"name": names[call["id"]], "args": args, "id": call["id"]}})
    return parts


def _g_response_part(m: Mapping[str, Any], names: dict[str, str]) -> dict[str, Any]:
    call_id = m.get("tool_call_id", "")
    text = _g_canonical_text(m.get("content"))
    response = {"error": text} if _looks_like_error(text) else {"output": text}
    name = names.get(call_id) or m.get("name") or "tool"
    return {"functionResponse": {"name": name, "id": call_id, "response": response}}


def openai_responses(messages: Sequence[dict[str, Any]]) -> tuple[list[Any], Any]:
    """Chat messages as Responses items: a leading system string becomes ``instructions``,
    assistant text an output message, each call a ``function_call`` (or
    ``custom_tool_call``), each tool message its output. Chat lets a call id recur in a
    later turn; Responses pairs by id across the request, so a recurring id is renamed
    (``id~2``) in its call and its outputs."""
    native: list[Any] = []
    system = None
    used: set[str] = set()
    block: dict[str, tuple[str, _RFamily]] = {}
    for k, m in enumerate(messages):
        role = m.get("role")
        content = m.get("content")
        if k == 0 and role == "system" and isinstance(content, str):
            system = content
        elif role in ("system", "developer", "user"):
            native.append(_r_chat_message(k, role, content))
        elif role == "assistant":
            texts = [t for t in _r_chat_texts(content) if t] + (
                [m["refusal"]] if m.get("refusal") else []
            )
            if texts:
                native.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": t} for t in texts],
                    }
                )
            block = {}
            for call in m.get("tool_calls") or ():
                key = _r_unique(call["id"], used)
                if call.get("type") == "custom":
                    body = call["custom"]
                    block.setdefault(call["id"], (key, _R_CUSTOM))
                    native.append(
                        {
                            "type": "custom_tool_call",
                            "call_id": key,
                            "name": body["name"],
                            "input": body["input"],
                        }
                    )
                else:
                    body = call["function"]
                    block.setdefault(call["id"], (key, _R_FUNCTION))
                    native.append(
                        {
                            "type": "function_call",
                            "call_id": key,
                            "name": body["name"],
                            "arguments": body["arguments"],
                        }
                    )
        elif role == "tool":
            key, family = block.get(m["tool_call_id"], (m["tool_call_id"], _R_FUNCTION))
            output: Any = (
                content
                if isinstance(content, str)
                else [{"type": "input_text", "text": t} for t in _r_chat_texts(content)]
            )
            native.append({"type": family.output, "call_id": key, "output": output})
        else:
            raise _r_invalid(k, f"role {role!r} has no Responses counterpart")
    return native, system


def _r_unique(key: str, used: set[str]) -> str:
    out, n = key, 1
    while out in used:
        n += 1
        out = f"{key}~{n}"
    used.add(out)
    return out


def _r_chat_message(k: int, role: str, content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": role, "content": content}
    parts = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            parts.append({"type": "input_text", "text": part["text"]})
        elif kind == "image_url":
            image = part["image_url"]
            parts.append(
                {
                    "type": "input_image",
                    "image_url": image["url"],
                    "detail": image.get("detail") or "auto",
                }
            )
        elif kind == "file":
            parts.append({"type": "input_file", **part["file"]})
        else:
            raise _r_invalid(k, f"content part {kind!r} has no Responses counterpart")
    return {"type": "message", "role": role, "content": parts}


def _r_chat_texts(content: Any) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    return [p.get("text", p.get("refusal", "")) for p in content]


_WRITERS = {
    "anthropic": anthropic,
    "bedrock_converse": bedrock_converse,
    "gemini": gemini,
    "openai_responses": openai_responses,
}
