"""Hands the core binding the façade's pieces it calls: the exception classes core errors
become, the serializer of SDK message objects and the OpenAI Chat insertion writer. The binding
imports nothing from this package; it is bound here, once, before anything else runs."""

from __future__ import annotations

from . import _core, errors
from .payload import dump_messages
from .providers import openai_chat

_core._bind(errors=errors, dump_messages=dump_messages, chat=openai_chat)
