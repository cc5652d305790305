"""Type stubs of the native module. Private: use the public API of ``ringbound``."""

from collections.abc import Callable, Sequence
from typing import Any

__version__: str
SYNTHESIZED_RESULT_TEXT: str
LEDGER_MARKER: str
SUMMARY_MARKER: str
MEDIA_PLACEHOLDER: str
#: The refusal of a Responses ``compaction_trigger`` that is not the final input item.
TRIGGER_NOT_LAST: str
#: The refusal of a Responses ``compaction_trigger`` that carries an ``id``.
TRIGGER_WITH_ID: str
#: Gemini's one-of data fields of a Part: (REST camelCase, SDK snake_case) pairs.
GEMINI_DATA_FIELDS: tuple[tuple[str, str], ...]
#: Gemini Part fields that carry nothing the model reads as content.
GEMINI_META_FIELDS: tuple[str, ...]
GEMINI_COUNT_MISMATCH: str
GEMINI_CALL_TURN_POSITION: str
GEMINI_RESPONSE_TURN_POSITION: str
GEMINI_ALTERNATE: str
#: Gemini Part fields that travel with the part they sign, whatever it becomes.
GEMINI_SIGNATURE_FIELDS: tuple[str, ...]
#: Responses items of hosted tools, which carry their own result.
RESPONSES_HOSTED: tuple[str, ...]
#: Every Responses input item type the core reads, in the order its refusal lists them.
RESPONSES_ITEM_TYPES: tuple[str, ...]
#: The blocks a Bedrock Converse user message may carry.
BEDROCK_USER_BLOCKS: tuple[str, ...]
#: The blocks a Bedrock Converse assistant message may carry.
BEDROCK_ASSISTANT_BLOCKS: tuple[str, ...]
#: The blocks a Bedrock Converse ``toolResult`` may carry.
BEDROCK_RESULT_BLOCKS: tuple[str, ...]
#: What stands between a system's own text and each note joined to it.
NOTE_SEPARATOR: str
#: The text of the user turn placed between two Anthropic assistant turns that cannot be
#: merged (the later one opens with thinking).
ANTHROPIC_OMITTED_TURNS_TEXT: str

def join_system_note(base: str, note: str | None = None, summary: str | None = None) -> str:
    """``base`` with the ledger ``note`` and the ``summary`` note joined to it, empty or absent
    parts left out; InvalidMessageError for a part that is not a string or holds a lone
    surrogate."""

def split_system_note(text: str) -> tuple[str, str | None, str | None]:
    """A system string taken apart where ``join_system_note`` joined the notes to it:
    ``(base, note, summary)``."""

def read_system(provider: str, system: bytes) -> tuple[list[list[str]], int]:
    """The top-level system of ``provider`` (its JSON; ``null`` for none) as the core counts
    it: the caller's texts and then each note, one group each; and its ``cache_control``
    markers. InvalidMessageError for a system the provider does not take."""

def tools_as_openai(provider: str, tools: bytes) -> bytes:
    """``tools``, the JSON of ``provider``'s tool definitions, as the OpenAI Chat tools the
    core counts (JSON); InvalidMessageError, in the provider's words, for tools it refuses."""

class CoreConfig:
    def __init__(
        self,
        *,
        budget: int,
        recent_tool_rings: int,
        recent_user_turns: int,
        pin_first_user_message: bool,
        pin_side_effect_ledger: bool,
        pin_security_system_prompt: bool,
        short_error_result_tokens: int,
        max_held_error_rings: int,
        side_effect_tools: list[str],
        ledger_fields: dict[str, list[str]],
        stages: list[str],
        drop_tools_schema: bool,
        synthesize_missing_results: bool,
        encoding: str,
        tokenizer_backend: str | None,
        max_messages: int,
        max_request_bytes: int,
        image_formula: str = "openai",
        token_ratio: float = 1.0,
        max_tool_result_tokens: int = 4000,
        min_result_tokens: int = 500,
        min_recent_tool_rings: int = 1,
        min_recent_user_turns: int = 1,
    ) -> None: ...

def _bind(*, errors: Any, dump_messages: Callable[..., Any], chat: Any) -> None:
    """Hands the binding the façade's pieces it calls (``ringbound._binding``); once."""

class Insertion:
    """What a plan puts into the request besides the caller's items kept as they are."""

    class Synthesized(Insertion):
        """A synthesized error result for ``call_id``, which lost its own."""

        call_id: str
        def __init__(self, call_id: str) -> None: ...

    class LedgerNote(Insertion):
        """The side-effect ledger note, an instruction message of ``role``."""

        text: str
        role: str
        def __init__(self, text: str, role: str) -> None: ...

    class Summary(Insertion):
        """The summary note of ``role``; ``text`` is empty where the plan only reserves its
        place."""

        text: str
        role: str
        def __init__(self, text: str, role: str) -> None: ...

    class Rewrite(Insertion):
        """Canonical message ``index`` with its content rewritten (``kind``: ``truncated``,
        ``deduped`` or ``media``)."""

        index: int
        kind: str
        text: str
        def __init__(self, index: int, kind: str, text: str) -> None: ...

PlanItem = int | Insertion

class PlanReport:
    """A plan's figures. Spans and rewrites are in the caller's item indices; the
    ``canonical_*`` ones in the canonical view's (the same for OpenAI Chat)."""

    tokens_before: int
    tokens_before_exact: bool
    tokens_after: int
    budget: int
    dropped_rings: list[tuple[int, int]]
    dropped_turns: list[tuple[int, int]]
    canonical_dropped: list[tuple[int, int]]
    stages: list[tuple[str, int, int]]
    repairs: list[str]
    rewrites: list[tuple[int, str, int]]
    canonical_rewrites: list[tuple[int, str]]
    summary_notes: list[int]
    ledger_added: list[tuple[str, str, str, str, str | None, str | None, int | None]]
    ledger_entries: int
    tools_dropped: bool
    @property
    def bucket_tokens(self) -> dict[str, int]: ...
    def with_budget(self, budget: int) -> PlanReport: ...
    def rendered(
        self,
        budget: int,
        tokens_after: int,
        dropped_rings: list[tuple[int, int]],
        dropped_turns: list[tuple[int, int]],
        rewrites: list[tuple[int, str, int]],
    ) -> PlanReport:
        """This report as the request was rendered: ``tokens_after`` as counted, the
        difference booked to the insertions, spans and rewrites in the caller's indices."""

class Plan:
    """A planned request: ``items`` in order (indices and insertions; the caller's own
    objects in place of indices when the plan was given them: a new list, the caller's to
    keep) and the ``report``."""

    items: list[Any]
    report: PlanReport
    def with_budget(self, budget: int) -> Plan: ...

def plan(
    request: NativeView | bytes | list[bytes] | None,
    config: CoreConfig,
    pinned: list[int],
    *,
    tools_json: bytes | None = None,
    cache: CountCache | None = None,
    groups: list[int] | None = None,
    binds_next: list[bool] | None = None,
    messages: list[Any] | None = None,
    summary_reserve: int | None = None,
    recorded: list[tuple[str, str, str, str, str | None, str | None, int | None]] | None = None,
    replay: tuple[list[int], list[tuple[int, str]]] | None = None,
) -> Plan:
    """Plans one request of any provider: a ``NativeView``, OpenAI Chat messages as JSON, or
    (``request`` None) the chat message objects ``messages`` read directly. Given
    ``messages``, the items are the request itself."""

def assemble_openai_chat_body(
    body: bytes,
    config: CoreConfig,
    rule: tuple[int, int, float, int],
    cache: CountCache | None = None,
) -> tuple[bytes, PlanReport, int, int]:
    """Assembles an OpenAI Chat body with the GIL released: ``(body, report,
    messages_before, messages_after)``. ``rule`` is ``(limit, margin, fill,
    default_reserve)``: the budget is ``floor(fill * (limit - reserve - margin))``, the
    reserve being the body's ``max_completion_tokens``/``max_tokens`` or
    ``default_reserve``."""

def assemble_items_body(
    provider: str,
    key: str,
    system_key: str | None,
    split: SplitBody,
    system: list[list[str]],
    tools_json: bytes | None,
    system_markers: int,
    config: CoreConfig,
    rule: tuple[int, int, float, int],
    cache: CountCache | None = None,
) -> tuple[bytes, PlanReport, int, int, int] | None:
    """Assembles a native provider's body with the GIL released when the plan only drops
    whole items (and may bring the ledger note, written where the adapter writes it, in the
    system field ``system_key`` or among the items) and the provider sends the rest as given,
    or merges the neighbours a drop brought together as its adapter does (Anthropic): ``split``
    is the body as ``split_body_at`` split it, ``system`` the adapter's system texts (holding
    ``system_markers`` cache markers), ``tools_json`` the tools in OpenAI's shape, ``rule`` as
    for ``assemble_openai_chat_body``. Returns ``(body, report, items_before, items_after,
    merged)``, the report's spans in item indices and its ``tokens_after`` the request as sent
    when ``merged`` items were merged; None when the adapter must render the plan or the core
    refuses the request (the adapter's path then says why)."""

def body_head(body: bytes, max_request_bytes: int) -> tuple[str | None, tuple[str, int] | None]:
    """A body's ``model`` and output reserve as ``(field, count)``, the field as the body
    spells it (``generation_config.max_output_tokens``), read without building its values;
    ``InvalidBodyError`` for a field on the reserve's path given under two spellings."""

def count(
    provider: str,
    messages_json: bytes | list[bytes],
    tools_json: bytes | None,
    encoding: str,
    tokenizer_backend: str | None = None,
    max_messages: int = ...,
    max_request_bytes: int = ...,
    cache: CountCache | None = None,
    image_formula: str = "openai",
    token_ratio: float = 1.0,
    system: list[list[str]] = ...,
) -> int:
    """Tokens of ``provider``'s native items behind ``system`` (its top-level system texts,
    as the adapter's ``system_texts`` gives them; none for ``openai_chat``, a ConfigError)
    as the provider receives them."""

def count_text(text: str, encoding: str, tokenizer_backend: str | None = None) -> int: ...
def cut_text(
    text: str, max_tokens: int, encoding: str = "o200k_base", from_end: bool = False
) -> str: ...
def content_id(text: str) -> str: ...
def validate(
    provider: str, messages_json: bytes | list[bytes]
) -> list[tuple[str, str | None, int, str]]:
    """Pairing issues of native messages by ``provider``'s own rules (``openai_chat``,
    ``anthropic``, ``openai_responses``, ``gemini``, ``bedrock_converse``); ConfigError for a
    provider the core does not read, InvalidMessageError naming a malformed message."""

def translate(
    source: str,
    target: str,
    messages_json: bytes,
    system_json: bytes | None = None,
    tools_json: bytes | None = None,
    reasoning: str = "drop",
    unsupported: str = "refuse",
    summaries: list[tuple[int, str]] = ...,
    gemini_sentinel: bool = True,
) -> tuple[
    bytes,
    bytes | None,
    bytes | None,
    list[tuple[int | None, str, str, str]],
    list[tuple[str, str]],
]:
    """``source``'s items (a JSON array), system and tools (JSON) in ``target``'s shape:
    ``(messages, system, tools, changes, ids)``, each JSON as bytes; a change is ``(item,
    action, what, detail)``. ConfigError for an unknown provider or option;
    InvalidMessageError for a malformed item, a refused part or an opaque compaction without
    a summary in ``summaries`` (``(item, text)``); PairingError when the source's calls and
    results do not pair."""

def translate_body(
    source: str,
    target: str,
    body: bytes,
    reasoning: str = "drop",
    unsupported: str = "refuse",
    summaries: list[tuple[int, str]] = ...,
    gemini_sentinel: bool = True,
) -> tuple[bytes, list[tuple[int | None, str, str, str]], list[tuple[str, str]]]:
    """A request body of ``source`` (JSON) as one of ``target``: ``(body, changes, ids)``;
    InvalidBodyError for a body without its history where ``source`` keeps it."""

def opaque_compactions(source: str, messages_json: bytes) -> list[int]:
    """The items of ``source``'s history (a JSON array) that are opaque compactions a
    translation keeps and so needs a summary of."""

def history_field(source: str) -> str:
    """The field of a ``source`` request body holding its history."""

class NativeView:
    """A native request read by the core: parsed, checked by its provider's rules and mapped
    to the canonical view, each part at its real cost; planned and counted without reading
    it again."""

    @property
    def issues(self) -> list[tuple[str, str | None, int, str]]: ...
    @property
    def spans(self) -> list[tuple[int, int]]:
        """Per canonical message, the native items ``(start, end)``; ``(-1, -1)`` for a system
        text."""
    @property
    def binds_next(self) -> list[bool]: ...
    @property
    def groups(self) -> list[int]: ...
    @property
    def pinned(self) -> list[int]: ...
    @property
    def facts(self) -> tuple[list[str | None], list[bool], list[int]]:
        """Per native item, what rendering needs: its role in the provider's word (or None),
        whether it holds a whitespace-only text block, and its ``cache_control`` blocks."""
    def kept_native(self, items: Sequence[Any]) -> list[int]:
        """The native items a plan's ``items`` (ints, ``Insertion``s) keep, as they are or
        rewritten, in order, each once."""
    def native_spans(self, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Canonical index spans as the native item spans they stand for; a span of system
        texts alone is left out."""
    def __len__(self) -> int: ...
    def message(self, k: int) -> dict[str, Any]:
        """Canonical message ``k`` as an OpenAI Chat dict; IndexError past the end."""
    def count(self) -> int: ...
    def written(
        self,
        provider: str,
        items: list[int | Insertion],
        system_json: Callable[[], str | None],
        system_markers: int,
        tools_dropped: bool,
        dump: Callable[[list[int]], list[bytes]],
        config: CoreConfig,
        cache: CountCache | None = None,
        messages: list[Any] | None = None,
    ) -> tuple[list[Any], list[int], bytes | None, int, list[int], int | None] | None:
        """The request the plan ``items`` sends, as the core writes it for a list of the
        caller's objects: ``(ops, fresh, system, merged, stripped, tokens)``. Each op keeps
        the caller's item at an index (``int``; given the caller's list ``messages``, the
        item itself) or is a new item ``(origins, json)`` made of the caller's items
        ``origins`` (one edited, neighbours merged, none for the ledger note); ``fresh`` lists
        the new items' positions; ``system`` is the system as JSON where the note goes into
        it; ``tokens`` the request's as sent where neighbours are merged (None: the plan's
        count). ``system_json()`` is asked only when the plan brings the note (``null`` for
        no system; it raises for one the notes cannot join); ``dump(indices)`` only for the
        items written anew. A summary note goes after the ledger note, the request counted as
        sent, and so are synthesized results. None for a plan the core does not write (the
        assembly refuses it). Raises ``PairingError`` where the request as sent would not
        pair."""

def read_native(
    provider: str,
    messages_json: bytes | list[bytes],
    system: list[list[str]],
    tools_json: bytes | None,
    config: CoreConfig,
    cache: CountCache | None = None,
    spans: Sequence[tuple[int, int]] | None = None,
) -> NativeView:
    """Reads ``provider``'s native items behind system messages of ``system`` texts;
    InvalidMessageError naming a malformed item, ConfigError for an unknown provider. The
    reading of a whole request is kept: the same items, system, tools and counting read again
    are only looked up. ``spans``: where each item stands in ``messages_json`` (one array), as
    ``split_body`` found them, so it is not split again; ignored when they do not fit it."""

def read_native_objects(
    provider: str,
    messages: list[Any],
    system: list[list[str]],
    tools_json: bytes | None,
    config: CoreConfig,
    cache: CountCache | None = None,
    dump: Callable[[list[int]], list[bytes]] | None = None,
) -> NativeView | None:
    """``read_native`` of the caller's list itself: JSON-native items keyed by a walk of their
    contents (only those the provider's cache lacks are serialized), others serialized by
    ``dump`` and keyed by their JSON. None when no item is JSON-native, or some are not and no
    ``dump`` is given, or the provider keeps no items."""

def split_body(
    body: bytes, key: str, max_request_bytes: int
) -> tuple[bytes, bytes, list[tuple[int, int]]] | None:
    """The body with its history array ``key`` emptied to ``[]``, the array's bytes and each
    item's span in it, found without reading the items; None when the scan cannot split it."""

class SplitBody:
    """A body split by ``split_body_at``: its history stays in the body."""

    @property
    def head(self) -> bytes:
        """The body with its history array emptied to ``[]``."""
    @property
    def spans(self) -> list[tuple[int, int]]:
        """Each item's byte span in the history array."""
    def array(self) -> bytes:
        """The history array's bytes, a copy (for the ``items`` path)."""

def split_body_at(body: bytes, key: str, max_request_bytes: int) -> SplitBody | None:
    """``split_body`` keeping the history in the body (``SplitBody``); None when the scan
    cannot split it."""

def cache_len() -> int: ...
def _panic(message: str) -> None:
    """Panics in the core with ``message`` (for tests: it arrives as ``InternalError``)."""

def cache_clear() -> None: ...
def wait_for_tables(encoding: str) -> None:
    """Blocks until the ``bpe_openai`` tables of ``encoding`` are built (tests, benchmarks)."""

def _object_key(message: Any) -> int | None:
    """The cache key of a message object, or None when it is keyed by its JSON (for tests)."""

def _walked_json(message: Any) -> bytes | None:
    """The JSON the walk of a message object writes of it when the cache misses it, or None
    when the serializer writes it instead (for tests)."""

class CountCache:
    """A bounded cache of parsed, counted messages (see ``Assembler(cache=...)``)."""

    def __init__(self, max_entries: int | None = ..., max_bytes: int | None = ...) -> None:
        """None takes the default; anything but an int in [0, 2**40] is a ConfigError."""
    def __len__(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    def clear(self) -> None: ...
