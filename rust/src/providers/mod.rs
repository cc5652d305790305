//! Provider formats behind one trait: each reads its native items from JSON, checks pairing by
//! its own rules in its own words (over the shared stray classifier in `pairing::stray`), and
//! maps the items onto the canonical view the core counts and plans, with real costs.

pub mod anthropic;
pub mod bedrock_converse;
pub(crate) mod edit;
pub mod gemini;
pub mod item_cache;
pub mod openai_chat;
pub mod openai_responses;
pub mod pynames;
pub mod system;
pub mod tools;

use crate::error::CoreError;
use crate::json_array;
use crate::pairing::PairingIssue;
use crate::plan::Layout;
use crate::view::{Message, Role, ToolCall};
use item_cache::ItemCache;
use std::sync::Arc;

pub(crate) use crate::json::json_kind;

/// A message of `role` with nothing in it yet, for a provider's canonical view to fill.
pub(crate) fn empty(role: Role) -> Message {
    Message {
        role,
        name: None,
        texts: Vec::new(),
        images: Vec::new(),
        other_part_tokens: 0,
        tool_calls: Vec::new(),
        tool_call_id: None,
        is_error: false,
        bytes: 0,
        framed_as: None,
        folded: crate::view::Folded::default(),
    }
}

/// A native request as the core sees it: canonical messages, how they group into the caller's
/// native items, and what the provider itself ignores.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Canonical {
    pub messages: Vec<Message>,
    /// Which native item each message stands for, and which messages must share a unit.
    pub layout: Layout,
    /// Native items before this one are ignored by the provider (a compaction replaced them):
    /// they are neither counted nor kept.
    pub first_counted: usize,
}

/// What rendering a plan needs to know of one native item, read with it, so the adapter that
/// copies the caller's items into the request never reads them again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItemFacts {
    /// The item's role in the provider's own word, where it has one.
    pub role: Option<&'static str>,
    /// It holds a text block of only whitespace, which the provider refuses: rendering strips it.
    pub blank_text: bool,
    /// Its blocks that carry a prompt-cache marker (an upper bound: a blank block's counts).
    pub cache_markers: u32,
    /// It opens with a thinking block, which must open its message: the adapter never sends
    /// it behind another message of its role, merged or not.
    pub opens_with_thinking: bool,
}

impl ItemFacts {
    /// The facts of an item of `role`, in a provider whose word for the model's turns is
    /// `model` (and `user` for the rest).
    pub fn of_role(role: Role, model: &'static str) -> ItemFacts {
        ItemFacts {
            role: Some(if role == Role::Assistant {
                model
            } else {
                "user"
            }),
            ..ItemFacts::default()
        }
    }
}

/// Kept neighbours that share a role (positions `range` among the kept items), and whether
/// they go out as one item: the adapter merges neighbours that only a drop brought together,
/// and leaves those the caller sent together as they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub range: std::ops::Range<usize>,
    pub merge: bool,
}

/// A limit on the prompt cache markers one request carries (Anthropic: 4, the system's
/// included), checked on the request as written.
pub struct MarkerLimit {
    /// The most one request may carry.
    pub most: u32,
    /// The markers one item as sent (its JSON) carries.
    pub count: fn(&[u8]) -> u32,
    /// The refusal of a request that carries `n`, in the provider's words.
    pub refusal: fn(u32) -> String,
}

/// The runs of `n` kept items, each item joining the one before it where `joins(j)` says so;
/// those of more than one item, each merged where `merge` says so.
pub(crate) fn runs(
    n: usize,
    joins: impl Fn(usize) -> bool,
    merge: impl Fn(&std::ops::Range<usize>) -> bool,
) -> Vec<Run> {
    let mut out = Vec::new();
    let mut start = 0;
    for end in 1..=n {
        if end < n && joins(end) {
            continue;
        }
        let range = start..end;
        if range.len() > 1 {
            out.push(Run {
                merge: merge(&range),
                range,
            });
        }
        start = end;
    }
    out
}

/// `elements` (each JSON) as a JSON array, appended to `out`.
pub(crate) fn push_array<E: AsRef<[u8]>>(out: &mut Vec<u8>, elements: impl IntoIterator<Item = E>) {
    out.push(b'[');
    for (n, element) in elements.into_iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(element.as_ref());
    }
    out.push(b']');
}

/// `item` with `value`, read from it, replaced by the array of `elements`: every other byte
/// of the item as it was. None when `value` does not lie in `item`.
pub(crate) fn with_array<E: AsRef<[u8]>>(
    item: &[u8],
    value: &serde_json::value::RawValue,
    elements: impl IntoIterator<Item = E>,
) -> Option<Vec<u8>> {
    let at = within(item, value)?;
    let mut out = Vec::with_capacity(item.len());
    out.extend_from_slice(&item[..at.start]);
    push_array(&mut out, elements);
    out.extend_from_slice(&item[at.end..]);
    Some(out)
}

/// Where `value`, read from `json`, lies in it.
pub(crate) fn within(
    json: &[u8],
    value: &serde_json::value::RawValue,
) -> Option<std::ops::Range<usize>> {
    let start = (value.get().as_ptr() as usize).checked_sub(json.as_ptr() as usize)?;
    let end = start + value.get().len();
    (end <= json.len()).then_some(start..end)
}

/// `{"role": role, "content": [elements]}`: the message the Anthropic and Bedrock adapters
/// make of merged neighbours.
pub(crate) fn message_of<E: AsRef<[u8]>>(
    role: &str,
    elements: impl IntoIterator<Item = E>,
) -> Vec<u8> {
    let mut out = format!(r#"{{"role":{},"content":"#, json_string(role)).into_bytes();
    push_array(&mut out, elements);
    out.push(b'}');
    out
}

/// The tool result of a native item that a rewrite changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResultAt<'a> {
    /// The call it answers.
    pub call_id: &'a str,
    /// Its position among the results of the first item the canonical message stands for
    /// (None in the message's other items), for a provider whose results are found by place.
    pub nth: Option<usize>,
}

/// Where a provider's adapter writes the side-effect ledger note of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoteAt {
    /// As a message item of the history, where the plan puts it.
    Items,
    /// In the system, which becomes this JSON value.
    System(String),
    /// Somewhere, or in a system, the core does not write.
    Adapter,
}

/// What stands between a system's own text and each note an assembly joins to it. The
/// façade's `split_system_note` takes a joined system apart at it, so it has this one home.
pub const NOTE_SEPARATOR: &str = "\n\n";

/// A system text with the ledger note and the summary note joined to it, in that order: the
/// parts that are not empty, `NOTE_SEPARATOR` between each. The one join of a system string,
/// for the core's writers and the façade's (`ringbound._core.join_system_note`).
pub fn system_with_notes(base: &str, note: Option<&str>, summary: Option<&str>) -> String {
    [Some(base), note, summary]
        .into_iter()
        .flatten()
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(NOTE_SEPARATOR)
}

/// `note` joined to the text `base` of a system string (`system_with_notes`), as a JSON string.
pub(crate) fn joined_note(base: &str, note: &str) -> String {
    json_string(&system_with_notes(base, Some(note), None))
}

/// The note joined to a system given as the JSON string `system` (`joined_note`).
pub(crate) fn note_in_string(system: &str, note: &str) -> NoteAt {
    match serde_json::from_str::<String>(system) {
        Ok(base) => NoteAt::System(joined_note(&base, note)),
        Err(_) => NoteAt::Adapter,
    }
}

/// Whether a system text is a note an assembly wrote: the side-effect ledger's or a summary.
pub fn is_note(text: &str) -> bool {
    text.starts_with(crate::ledger::MARKER) || text.starts_with(crate::summary::MARKER)
}

/// The caller's part of a system string an assembly joined its notes to: what the system
/// reader counts as the caller's (`system::split_notes`).
pub(crate) fn base_of(text: &str) -> &str {
    system::split_notes(text).0
}

/// A system given as the JSON string `system`, without the notes joined to it, as a JSON
/// string; None for what is not a string.
pub(crate) fn string_without_notes(system: &str) -> Option<String> {
    let text: String = serde_json::from_str(system).ok()?;
    Some(json_string(base_of(&text)))
}

/// The JSON array `array` without its elements that are notes: a string, or an object whose
/// `text` is one; None for what is not an array.
pub(crate) fn array_without_notes(array: &str) -> Option<String> {
    array_without(array, is_note)
}

/// The JSON array `array` without its elements whose text (a string, or an object's `text`)
/// `drop` says goes; None for what is not an array.
pub(crate) fn array_without(array: &str, drop: impl Fn(&str) -> bool) -> Option<String> {
    let elements: Vec<&serde_json::value::RawValue> = serde_json::from_str(array).ok()?;
    let kept: Vec<&str> = elements
        .iter()
        .filter(|e| !element_text(e).is_some_and(|t| drop(&t)))
        .map(|e| e.get())
        .collect();
    Some(format!("[{}]", kept.join(",")))
}

/// The text of an element of a system array: the string itself, or an object's `text`.
pub(crate) fn element_text(e: &serde_json::value::RawValue) -> Option<std::borrow::Cow<'_, str>> {
    let text = match e.get().as_bytes().first() {
        Some(b'"') => Some(e),
        _ => edit::field(e, "text"),
    };
    text.and_then(edit::string)
}

/// `s` as a JSON string.
pub(crate) fn json_string(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len() + 2);
    crate::json::write::write_str(&mut out, s);
    String::from_utf8(out).unwrap_or_default()
}

/// The JSON array `array` (the raw JSON of a list) with `value` appended; None for what is
/// not an array.
pub(crate) fn appended(array: &str, value: &str) -> Option<String> {
    let items: Vec<&serde_json::value::RawValue> = serde_json::from_str(array).ok()?;
    let mut parts: Vec<&str> = items.iter().map(|v| v.get()).collect();
    parts.push(value);
    Some(format!("[{}]", parts.join(",")))
}

/// Where a provider puts the error results a plan synthesizes for calls that lost theirs
/// (`Provider::results_placed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultsAt {
    /// Into the first item of the turn after the call's (after its own leading results)
    /// where that item is kept, else a new user item after the call's turn (Anthropic).
    NextTurn,
    /// After the item the plan puts them behind: into it when it is a user item (its own
    /// results first), else a new user item, merged with a kept user item after it
    /// (Bedrock Converse).
    Behind,
    /// Into the next kept item when it is a user item (after its own results), else a new
    /// user item after the call's (Gemini).
    NextItem,
    /// A new item of its own where the plan puts it, notes sent as items included (OpenAI
    /// Responses).
    InPlace,
    /// Only the adapter writes them.
    Adapter,
}

/// One provider's wire format.
///
/// Of the writing methods, `None` (and `NoteAt::Adapter`, `ResultsAt::Adapter`) means the core
/// does not write that piece: the objects path then refuses the plan (`InternalError`, nothing
/// sent), and a body's native path hands it to the items path, which is the objects path.
/// "The adapter" in these docs is the Python rendering each rule was taken from, kept in the
/// tests as the oracle (`tests/providers/<provider>_oracle.py`).
pub trait Provider {
    /// The key callers name the provider by.
    const KEY: &'static str;
    /// One native item as read. Items are shared (`Arc`): one met before is the cache's own,
    /// not a copy of it, so a warm reading allocates nothing per item.
    type Item: Send + Sync + 'static;

    /// Reads native item `i` from its JSON; `InvalidMessage` naming `i` when it is malformed.
    fn parse(&self, i: usize, raw: &[u8]) -> Result<Self::Item, CoreError>;

    /// Every pairing issue by the provider's own rules, quoting its wording, in item order.
    fn validate(&self, items: &[Arc<Self::Item>]) -> Vec<PairingIssue>;

    /// The canonical view of the items, with real costs.
    fn canonical(&self, items: &[Arc<Self::Item>]) -> Canonical;

    /// The pairing issues and the canonical view together, as a reading needs both: a
    /// provider whose rules and view come of one pass over the items gives both from one pass.
    fn issues_and_canonical(&self, items: &[Arc<Self::Item>]) -> (Vec<PairingIssue>, Canonical) {
        (self.validate(items), self.canonical(items))
    }

    /// Tokens the provider adds to the prompt whenever tools are given (a system prompt of its
    /// own describing tool use), beyond the tools' definitions.
    const TOOL_SYSTEM_TOKENS: u32 = 0;

    /// Whether a tool result carries its call's name and an error reads as `Error: text`
    /// (`Layout::results_named`).
    const RESULTS_NAMED: bool = false;

    /// Whether the request must open with the first turn as given (a user turn): the system
    /// then holds on to it, and no plan drops it.
    const SYSTEM_HOLDS_FIRST_TURN: bool = false;

    /// What rendering needs to know of `item` (`ItemFacts`).
    fn facts(&self, _item: &Self::Item) -> ItemFacts {
        ItemFacts::default()
    }

    /// Whether the items `kept` (in order, of a plan that only keeps items) go out exactly as
    /// the caller gave them: nothing to merge or strip.
    fn sends_as_given(&self, _facts: &[ItemFacts], _kept: &[usize]) -> bool {
        true
    }

    /// Where the items `kept` do not go out as given only because same-role neighbours are
    /// merged (as the adapter merges them): the runs of kept positions that share a role and
    /// whether each becomes one item. None when the core does not merge them (the default).
    fn merges(&self, _facts: &[ItemFacts], _kept: &[usize]) -> Option<Vec<Run>> {
        None
    }

    /// The prompt cache markers one request may carry, which the provider refuses beyond;
    /// None where it sets no limit the core checks.
    fn marker_limit(&self) -> Option<MarkerLimit> {
        None
    }

    /// Where the provider sends an item of its own between two kept neighbours that may be
    /// neither merged nor sent side by side (Anthropic: a user turn before an assistant turn
    /// that opens with thinking behind another, as its adapter places one): positions among
    /// `kept` each goes before, and the item's JSON. `merges` never joins across one.
    fn parted(&self, _facts: &[ItemFacts], _kept: &[usize]) -> (Vec<usize>, &'static str) {
        (Vec::new(), "")
    }

    /// The items `items` (a run `merges` merges, each the caller's JSON) as the one item the
    /// adapter sends, or None when the core does not write it. `role` is the run's.
    fn merged(&self, _role: &str, _items: &[&[u8]]) -> Option<Vec<u8>> {
        None
    }

    /// A kept item (the caller's JSON) whose facts say it holds text the adapter strips, as
    /// the adapter sends it: `Some(None)` when it goes out as it is, None when the core does
    /// not write it.
    fn stripped(&self, _item: &[u8]) -> Option<Option<Vec<u8>>> {
        None
    }

    /// Kept item `item` (the caller's JSON) with the tool result `at` names holding `text` in
    /// place of its output, as the adapter writes a result a cheap stage rewrote (cut, or a
    /// stub for a superseded read): `Some(None)` when the item holds no such result, None when
    /// the core does not write it.
    fn result_rewritten(
        &self,
        _item: &[u8],
        _at: ResultAt<'_>,
        _text: &str,
    ) -> Option<Option<Vec<u8>>> {
        None
    }

    /// Kept item `item` (the caller's JSON) with its images (and what the provider prices as
    /// images) made the text `text`, as the adapter writes a message the media stage
    /// rewrote; `first` when it is the first item the canonical message stands for.
    /// `Some(None)` when the item holds none, None when the core does not write it.
    fn media_rewritten(&self, _item: &[u8], _first: bool, _text: &str) -> Option<Option<Vec<u8>>> {
        None
    }

    /// Where the error results a plan synthesizes go (`ResultsAt`).
    fn results_placed(&self) -> ResultsAt {
        ResultsAt::Adapter
    }

    /// The error result a plan synthesizes for `call`, the `nth` call of item `item` of
    /// `items` (as read), as the adapter writes it: one block (or part) of a user item's
    /// content. None when the core does not write it.
    ///
    /// Errors: `Unrepairable` for a call whose result only the caller can make.
    fn synthesized_result(
        &self,
        _items: &[Arc<Self::Item>],
        _item: usize,
        _nth: usize,
        _call: &ToolCall,
    ) -> Result<Option<String>, CoreError> {
        Ok(None)
    }

    /// Kept item `item` (the caller's JSON, a user item) with the synthesized `results`
    /// (`synthesized_result`) added where the provider puts them, as the adapter writes it;
    /// None when the core does not write it (or the provider refuses such an item).
    fn with_results(&self, _item: &[u8], _results: &[String]) -> Option<Vec<u8>> {
        None
    }

    /// A new user item of the synthesized `results`, as the adapter writes it: by default
    /// `{"role": "user", "content": results}` (Anthropic, Bedrock Converse).
    fn results_item(&self, results: &[String]) -> Option<Vec<u8>> {
        Some(message_of("user", results.iter().map(String::as_bytes)))
    }

    /// The system `system` (JSON) without the ledger and summary notes an earlier assembly
    /// left in it, for this plan's notes to be placed anew (`ledger_note`) as the adapter
    /// replaces them; None when the core does not rewrite it.
    fn without_notes(&self, _system: &str) -> Option<String> {
        None
    }

    /// Where the adapter writes a plan's ledger note `note`, given the body's system as JSON
    /// (None when it has none).
    fn ledger_note(&self, _system: Option<&str>, _note: &str) -> NoteAt {
        NoteAt::Adapter
    }

    /// Native items the provider's rules keep whatever the budget.
    fn pinned(&self, _items: &[Arc<Self::Item>]) -> Vec<usize> {
        Vec::new()
    }

    /// Where items read before are kept by the hash of their JSON, for a provider that keeps
    /// them.
    fn item_cache(&self) -> Option<&'static ItemCache<Self::Item>> {
        None
    }

    /// A rule over the whole list of items, checked once they are all read.
    fn check_items(&self, _items: &[Arc<Self::Item>]) -> Result<(), CoreError> {
        Ok(())
    }

    /// Reads every item of JSON arrays whose elements follow each other, each item met before
    /// taken from the provider's cache.
    fn parse_all(&self, parts: &[&[u8]]) -> Result<Vec<Arc<Self::Item>>, CoreError> {
        self.parse_elements(&json_array::split_all(parts)?)
    }

    /// Reads every item given as its own JSON (an array's elements, already split), each item
    /// met before taken from the provider's cache.
    fn parse_elements(&self, elements: &[&[u8]]) -> Result<Vec<Arc<Self::Item>>, CoreError> {
        let keys = self.item_cache().map(|cache| {
            elements
                .iter()
                .map(|raw| cache.key(raw))
                .collect::<Vec<_>>()
        });
        self.parse_elements_keyed(elements, keys.as_deref())
    }

    /// `parse_elements` of elements whose cache keys (`ItemCache::key`) the caller has
    /// computed already, `keys`, one per element; None for a provider that keeps no items.
    fn parse_elements_keyed(
        &self,
        elements: &[&[u8]],
        keys: Option<&[u128]>,
    ) -> Result<Vec<Arc<Self::Item>>, CoreError> {
        let cache = self.item_cache().zip(keys);
        let mut items = Vec::with_capacity(elements.len());
        for (i, &raw) in elements.iter().enumerate() {
            let item = match cache {
                None => Arc::new(self.parse(i, raw)?),
                Some((cache, keys)) => {
                    let key = keys[i];
                    match cache.get(key) {
                        Some(hit) => hit,
                        None => {
                            let item = Arc::new(self.parse(i, raw)?);
                            cache.insert(key, Arc::clone(&item), raw.len());
                            item
                        }
                    }
                }
            };
            items.push(item);
        }
        self.check_items(&items)?;
        Ok(items)
    }

    /// Reads items keyed from the caller's objects (`native::read_keyed`): each one met
    /// before taken from the provider's cache by its key, the others serialized by `dump`,
    /// parsed and kept under the key of what was serialized. `check` is given the bytes of
    /// JSON the items are before any is parsed.
    fn parse_keyed(
        &self,
        keys: &[u128],
        dump: &mut Dump<'_>,
        check: &dyn Fn(usize) -> Result<(), CoreError>,
    ) -> Result<Vec<Arc<Self::Item>>, CoreError> {
        let cache = self.item_cache();
        let mut bytes = 0;
        let mut found: Vec<Option<Arc<Self::Item>>> = keys
            .iter()
            .map(|&key| {
                let (item, size) = cache?.get_sized(key)?;
                bytes += size;
                Some(item)
            })
            .collect();
        let missed: Vec<usize> = (0..keys.len()).filter(|&i| found[i].is_none()).collect();
        let dumped = if missed.is_empty() {
            Vec::new()
        } else {
            dump(&missed)?
        };
        if dumped.len() != missed.len() {
            return Err(list_changed());
        }
        check(bytes + dumped.iter().map(|(_, raw)| raw.len()).sum::<usize>())?;
        for (&i, (key, raw)) in missed.iter().zip(dumped) {
            let item = Arc::new(self.parse(i, &raw)?);
            if let Some(cache) = cache {
                cache.insert(key, Arc::clone(&item), raw.len());
            }
            found[i] = Some(item);
        }
        let items: Vec<Arc<Self::Item>> = found
            .into_iter()
            .collect::<Option<_>>()
            .ok_or_else(list_changed)?;
        self.check_items(&items)?;
        Ok(items)
    }
}

/// Serializes the caller's items at the given indices (those a keyed reading did not find),
/// each with the key of the object it was serialized from.
pub type Dump<'a> = dyn FnMut(&[usize]) -> Result<Vec<(u128, Vec<u8>)>, CoreError> + 'a;

/// The caller's list changed while it was read (another thread appended or replaced items).
pub fn list_changed() -> CoreError {
    CoreError::InvalidMessage {
        index: None,
        reason: "the list of messages changed while it was read".into(),
    }
}

/// A cache of parsed items for a provider, made on first use.
macro_rules! cached_items {
    ($item:ty, $seed:expr) => {{
        static CACHE: std::sync::OnceLock<crate::providers::item_cache::ItemCache<$item>> =
            std::sync::OnceLock::new();
        Some(CACHE.get_or_init(|| crate::providers::item_cache::ItemCache::new($seed)))
    }};
}
pub(crate) use cached_items;

/// Empties every provider's cache of parsed items (what a cold benchmark needs).
pub fn clear_item_caches() {
    fn clear<P: Provider>(p: P) {
        if let Some(cache) = p.item_cache() {
            cache.clear();
        }
    }
    clear(anthropic::Anthropic);
    clear(openai_responses::OpenAIResponses);
    clear(gemini::Gemini);
    clear(bedrock_converse::BedrockConverse);
}
