//! Loading a request: split the provider's messages, look each one up in the cache by the hash
//! of its bytes, parse only the misses, and count tokens only when the plan asks. Limits are
//! checked before any work that grows with the input, so an oversized request is refused in
//! microseconds.

use std::borrow::Cow;
use std::sync::Arc;

use crate::cache::{CountCache, Entry};
use crate::count::chat::{
    message_tokens_bound, message_tokens_until, message_tokens_with, TOKENS_PER_NAME,
    TOOL_CALL_OVERHEAD,
};
use crate::count::image_price::ImageFormula;
use crate::count::tools::tools_tokens;
use crate::count::{counter, Backend, Counter, Encoding};
use crate::error::CoreError;
use crate::json::message as openai_chat;
use crate::json_array;
use crate::ledger;
use crate::summary;
use crate::view::{Message, Role};

/// How tokens are counted: which encoding, by which exact backend, images priced by whose
/// formula, and the ratio that turns the count into the provider's own tokens (1000 = 1.0;
/// for providers without a public tokenizer, a calibrated estimate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheme {
    pub encoding: Encoding,
    pub backend: Backend,
    pub images: ImageFormula,
    pub ratio_milli: u32,
}

impl Scheme {
    /// Exact BPE with OpenAI framing and this scheme's image formula.
    pub fn openai(encoding: Encoding, backend: Backend) -> Scheme {
        Scheme {
            encoding,
            backend,
            images: ImageFormula::OpenAi,
            ratio_milli: 1000,
        }
    }

    pub fn counter(self) -> &'static dyn Counter {
        counter(self.encoding, self.backend)
    }

    pub fn scale(self, tokens: u32) -> u32 {
        if self.ratio_milli == 1000 {
            return tokens;
        }
        let scaled = (u64::from(tokens) * u64::from(self.ratio_milli)).div_ceil(1000);
        u32::try_from(scaled).unwrap_or(u32::MAX)
    }

    /// Cache seed: counts depend on the encoding only (backends are exact and equal), and the
    /// accounting version is part of the key so a change of framing never reads stale counts.
    pub fn seed(self) -> u64 {
        const ACCOUNTING_VERSION: u64 = 2;
        let enc = match self.encoding {
            Encoding::O200kBase => 1,
            Encoding::Cl100kBase => 2,
        };
        let images = match self.images {
            ImageFormula::OpenAi => 0,
            ImageFormula::Anthropic => 1,
            ImageFormula::Gemini => 2,
        };
        (ACCOUNTING_VERSION << 16) | (images << 8) | enc
    }
}

/// Size limits a request must respect before it is parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_messages: usize,
    pub max_request_bytes: usize,
}

/// Where the full text of a message comes from when it has to be counted.
enum Source<'a> {
    /// Parsed in this request (a cache miss): the full message.
    Parsed(Message),
    /// Taken from the cache without a count, or parsed here but older than the request's last
    /// `KEEP_PARSED_TAIL_BYTES`: its JSON, to parse again if counted.
    Raw(&'a [u8]),
    /// The entry itself holds the full message (built in memory, not from JSON).
    Entry,
    /// Found in the cache without its JSON (the caller's object was read, not serialized):
    /// serialized again through the request's `Reread` if counted.
    Reread,
}

/// One message of a request as the loader is given it.
pub enum Given<'a> {
    /// Its JSON, looked up by the hash of these bytes.
    Json(&'a [u8]),
    /// Looked up already under the key of the caller's object, and found.
    Found(Arc<Entry>),
    /// Looked up already under `key` and not found: its JSON, to parse and cache there.
    Missed { key: u128, raw: &'a [u8] },
}

impl Given<'_> {
    /// Bytes of the message's JSON.
    pub fn len(&self) -> usize {
        match self {
            Given::Json(raw) | Given::Missed { raw, .. } => raw.len(),
            Given::Found(entry) => entry.message.bytes,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The JSON of message `i` again, for a message found in the cache without it; None when it
/// cannot be had (the caller's object changed meanwhile), and the bound is used instead.
pub trait Reread: Sync {
    fn json(&self, i: usize) -> Option<Vec<u8>>;
}

/// Messages parsed in this request stay parsed if they lie in its last this many bytes; older
/// ones are parsed again if the plan needs their texts. The plan keeps the newest messages, so
/// those are the ones it counts; most of a long history is dropped uncounted, and holding all
/// its texts at once would double an assembly's memory. Parsing again costs little beside
/// counting (a gigabyte a second against tens of megabytes).
const KEEP_PARSED_TAIL_BYTES: usize = 2 << 20;

/// A parsed request whose token counts are computed on demand (and then cached).
pub struct Request<'a> {
    entries: Vec<Arc<Entry>>,
    sources: Vec<Source<'a>>,
    reread: Option<&'a dyn Reread>,
    scheme: Scheme,
    /// Tokens of the tools schema (0 without tools).
    pub tools_tokens: u64,
}

/// The cached form of a parsed message: texts the plan never reads are left out.
fn skeleton(full: &Message) -> Message {
    let keep = ledger::parse(full).is_some()
        || summary::is_note(full)
        || (full.role == Role::Tool
            && full.texts.len() == 1
            && crate::plan::is_synthesized(&full.texts[0]));
    Message {
        role: full.role,
        name: full.name.clone(),
        texts: if keep { full.texts.clone() } else { Vec::new() },
        images: full.images.clone(),
        other_part_tokens: full.other_part_tokens,
        tool_calls: full.tool_calls.clone(),
        tool_call_id: full.tool_call_id.clone(),
        is_error: full.is_error,
        bytes: full.bytes,
        framed_as: full.framed_as.clone(),
        folded: full.folded,
    }
}

impl<'a> Request<'a> {
    /// A request of messages built in memory (tests, insertions): nothing cached.
    pub fn from_messages(messages: Vec<Message>, scheme: Scheme) -> Request<'a> {
        let entries = messages
            .into_iter()
            .map(|m| {
                let bound = message_tokens_bound(&m, m.bytes, scheme.images);
                Arc::new(Entry::new(m, bound))
            })
            .collect::<Vec<_>>();
        Request {
            sources: entries.iter().map(|_| Source::Entry).collect(),
            entries,
            reread: None,
            scheme,
            tools_tokens: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The messages, as the plan reads them.
    pub fn messages(&self) -> Vec<&Message> {
        self.entries.iter().map(|e| &e.message).collect()
    }

    pub fn message(&self, i: usize) -> &Message {
        &self.entries[i].message
    }

    /// Message `i`, if the request has one there.
    pub fn get(&self, i: usize) -> Option<&Message> {
        self.entries.get(i).map(|e| &e.message)
    }

    /// Exact tokens of message `i`, counted now if no assembly has needed them before.
    pub fn tokens(&self, i: usize) -> u32 {
        let exact = *self.entries[i]
            .tokens
            .get_or_init(|| self.count(i, u32::MAX).unwrap_or(u32::MAX));
        self.scheme.scale(exact)
    }

    /// The bound of message `i` from its bytes, whether or not it has been counted since.
    pub fn byte_bound(&self, i: usize) -> u32 {
        self.scheme.scale(self.entries[i].bound)
    }

    /// `Some(tokens(i))` when it is at most `limit`, else `None`, tokenizing about `limit`
    /// tokens at most: a message too big to fit is found so without counting all of it. An
    /// exact count found on the way is cached, and so is the fact that the message exceeds
    /// the limit.
    pub fn tokens_within(&self, i: usize, limit: u64) -> Option<u32> {
        let entry = &self.entries[i];
        if entry.tokens.get().is_some() {
            let t = self.tokens(i);
            return (u64::from(t) <= limit).then_some(t);
        }
        let raw_limit = u32::try_from(self.raw_limit(limit)).unwrap_or(u32::MAX);
        if entry.exceeds(raw_limit) {
            return None;
        }
        let Some(counted) = self.count(i, raw_limit) else {
            entry.found_more_than(raw_limit);
            return None;
        };
        // Another thread may have set it meanwhile, to the same count.
        let _ = entry.tokens.set(counted);
        Some(self.scheme.scale(counted))
    }

    /// Raw tokens of message `i` if at most `limit`, counted from its source.
    fn count(&self, i: usize, limit: u32) -> Option<u32> {
        let entry = &self.entries[i];
        let (counter, images) = (self.counter(), self.scheme.images);
        match &self.sources[i] {
            Source::Parsed(full) => message_tokens_until(full, counter, images, limit),
            Source::Entry => message_tokens_until(&entry.message, counter, images, limit),
            Source::Raw(_) | Source::Reread => match self.parse_again(i) {
                Some(full) => message_tokens_until(&full, counter, images, limit),
                // The same message parsed once already; should it somehow not parse now, the
                // bound still keeps the budget.
                None => Some(entry.bound).filter(|&b| b <= limit),
            },
        }
    }

    /// Message `i` parsed again from its JSON, for a source that holds no parsed message.
    fn parse_again(&self, i: usize) -> Option<Message> {
        match &self.sources[i] {
            Source::Raw(raw) => openai_chat::parse_raw(i, raw).ok(),
            Source::Reread => {
                let raw = self.reread?.json(i)?;
                openai_chat::parse_raw(i, &raw).ok()
            }
            Source::Parsed(_) | Source::Entry => None,
        }
    }

    /// Message `i` with every text, for a stage that rewrites it (the cache keeps only what
    /// planning reads, so a message taken from it is parsed again).
    pub fn full(&self, i: usize) -> Cow<'_, Message> {
        match &self.sources[i] {
            Source::Parsed(full) => Cow::Borrowed(full),
            Source::Entry => Cow::Borrowed(&self.entries[i].message),
            Source::Raw(_) | Source::Reread => self
                .parse_again(i)
                .map_or(Cow::Borrowed(&self.entries[i].message), Cow::Owned),
        }
    }

    /// Tokens of a message the plan inserts (a synthesized result, the ledger note).
    pub fn inserted_tokens(&self, msg: &Message) -> u64 {
        let exact = message_tokens_with(msg, self.counter(), self.scheme.images);
        u64::from(self.scheme.scale(exact))
    }

    /// For each tool call of message `i`, a hash of its name and canonical arguments (two
    /// calls agree on it when they make the same call, whatever the JSON's spacing or key order).
    pub fn call_keys(&self, i: usize) -> &[u64] {
        self.entries[i].call_keys.get_or_init(|| {
            self.entries[i]
                .message
                .tool_calls
                .iter()
                .map(|c| {
                    let args = serde_json::from_str::<serde_json::Value>(&c.arguments)
                        .map_or_else(|_| c.arguments.clone(), |v| v.to_string().into());
                    xxhash_rust::xxh3::xxh3_64(format!("{}\0{args}", c.name).as_bytes())
                })
                .collect()
        })
    }

    /// The identifiers of message `i`, hashed (`identifiers::of_message`), found once per
    /// message (a message taken from the cache without its texts is parsed again for them).
    pub fn identifiers(&self, i: usize) -> &[u64] {
        self.entries[i]
            .identifiers
            .get_or_init(|| crate::identifiers::of_message(&self.full(i)))
    }

    /// Tokens of a message as the tokenizer counts them, before the provider ratio.
    pub fn raw_tokens(&self, msg: &Message) -> u64 {
        u64::from(message_tokens_with(msg, self.counter(), self.scheme.images))
    }

    /// The most raw tokens whose scaled count stays within `limit`.
    pub fn raw_limit(&self, limit: u64) -> u64 {
        limit * 1000 / u64::from(self.scheme.ratio_milli.max(1))
    }

    /// Whether message `i` has an exact count without tokenizing anything.
    pub fn is_counted(&self, i: usize) -> bool {
        self.entries[i].tokens.get().is_some()
    }

    /// An upper bound of message `i`'s tokens: its exact count when known.
    pub fn bound(&self, i: usize) -> u32 {
        let entry = &self.entries[i];
        self.scheme
            .scale(entry.tokens.get().copied().unwrap_or(entry.bound))
    }

    /// Tokens of every message, all counted.
    pub fn message_tokens(&self) -> u64 {
        (0..self.len()).map(|i| u64::from(self.tokens(i))).sum()
    }

    pub fn counter(&self) -> &'static dyn Counter {
        self.scheme.counter()
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }
}

/// InvalidMessage unless a request of `bytes` bytes of messages (and its tools) is within
/// `max_request_bytes`.
pub fn check_size(bytes: usize, tools: Option<&[u8]>, limits: Limits) -> Result<(), CoreError> {
    let bytes = bytes + tools.map_or(0, <[u8]>::len);
    if bytes > limits.max_request_bytes {
        return Err(CoreError::InvalidMessage {
            index: None,
            reason: format!(
                "the request is {bytes} bytes, over max_request_bytes = {}",
                limits.max_request_bytes
            ),
        });
    }
    Ok(())
}

/// InvalidMessage unless a request of `messages` messages is within `max_messages`.
pub fn check_count(messages: usize, limits: Limits) -> Result<(), CoreError> {
    if messages > limits.max_messages {
        return Err(CoreError::InvalidMessage {
            index: None,
            reason: format!(
                "the request has {messages} messages, over max_messages = {}",
                limits.max_messages
            ),
        });
    }
    Ok(())
}

/// Parses OpenAI Chat Completions messages (and the `tools` parameter) through the cache. The
/// messages come as one JSON array or as several whose elements follow each other (a long
/// history is serialized in parts, to keep serializing it from doubling its size in memory).
pub fn load_openai_chat<'a>(
    json: &[&'a [u8]],
    tools: Option<&[u8]>,
    scheme: Scheme,
    limits: Limits,
    cache: &CountCache,
) -> Result<Request<'a>, CoreError> {
    check_size(json.iter().map(|part| part.len()).sum(), tools, limits)?;
    let mut raws = Vec::new();
    for part in json {
        raws.extend(json_array::split(part)?);
    }
    check_count(raws.len(), limits)?;
    let given = raws.into_iter().map(Given::Json).collect();
    load_given(given, None, tools, scheme, cache)
}

/// The request of messages `given` as JSON or as cache lookups made already; `reread` gives
/// the JSON of those found without it. Sizes are checked by the caller.
pub fn load_given<'a>(
    given: Vec<Given<'a>>,
    reread: Option<&'a dyn Reread>,
    tools: Option<&[u8]>,
    scheme: Scheme,
    cache: &CountCache,
) -> Result<Request<'a>, CoreError> {
    let seed = scheme.seed();
    let mut entries = Vec::with_capacity(given.len());
    let mut sources = Vec::with_capacity(given.len());
    let mut bytes_from_end: usize = given.iter().map(Given::len).sum();
    for (i, message) in given.into_iter().enumerate() {
        let in_tail = bytes_from_end <= KEEP_PARSED_TAIL_BYTES;
        bytes_from_end -= message.len();
        let (key, raw) = match message {
            Given::Found(entry) => {
                entries.push(entry);
                sources.push(Source::Reread);
                continue;
            }
            Given::Missed { key, raw } => (key, raw),
            Given::Json(raw) => (CountCache::key(raw, seed), raw),
        };
        // Also a message missed only because an equal one earlier in this request had not
        // been cached yet: the two share one entry, and so one count.
        if let Some(entry) = cache.get(key) {
            entries.push(entry);
            sources.push(Source::Raw(raw));
            continue;
        }
        let full = openai_chat::parse_raw(i, raw)?;
        let entry = Arc::new(Entry::new(
            skeleton(&full),
            message_tokens_bound(&full, raw.len(), scheme.images),
        ));
        cache.insert(key, Arc::clone(&entry));
        entries.push(entry);
        sources.push(if in_tail {
            Source::Parsed(full)
        } else {
            Source::Raw(raw)
        });
    }
    Ok(Request {
        entries,
        sources,
        reread,
        scheme,
        tools_tokens: tools_schema_tokens(tools, scheme)?,
    })
}

/// Tokens of the tools schema given as a JSON array (0 without one).
fn tools_schema_tokens(tools: Option<&[u8]>, scheme: Scheme) -> Result<u64, CoreError> {
    let Some(bytes) = tools else { return Ok(0) };
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| CoreError::InvalidMessage {
            index: None,
            reason: format!("tools must be a JSON array ({e})"),
        })?;
    Ok(u64::from(
        scheme.scale(tools_tokens(&value, scheme.counter())?),
    ))
}

/// The request of canonical messages a provider's parser built from its native items, each
/// looked up in the cache by the hash of its content (there is no chat JSON to hash), so a
/// history seen before is counted once whatever its provider.
pub fn load_canonical(
    messages: Vec<Message>,
    tools: Option<&[u8]>,
    scheme: Scheme,
    cache: &CountCache,
) -> Result<Request<'static>, CoreError> {
    let seed = scheme.seed();
    let mut entries = Vec::with_capacity(messages.len());
    let mut sources = Vec::with_capacity(messages.len());
    let mut record = Vec::with_capacity(256);
    for full in messages {
        let key = content_key(&full, seed, &mut record);
        let entry = cache.get(key).unwrap_or_else(|| {
            let entry = Arc::new(Entry::new(
                skeleton(&full),
                message_tokens_bound(&full, counted_bytes(&full), scheme.images),
            ));
            cache.insert(key, Arc::clone(&entry));
            entry
        });
        entries.push(entry);
        sources.push(Source::Parsed(full));
    }
    Ok(Request {
        entries,
        sources,
        reread: None,
        scheme,
        tools_tokens: tools_schema_tokens(tools, scheme)?,
    })
}

/// Bytes standing in for a canonical message's JSON in its token bound: every text counting
/// reads (a token covers at least one byte) and a byte for each framing token a name or a call
/// adds. A provider's parser builds the message from its own JSON, whose size may be smaller
/// than what the canonical message reads (a merged turn) or not recorded at all.
fn counted_bytes(m: &Message) -> usize {
    let texts = m.texts.iter().map(|t| t.len()).sum::<usize>()
        + m.role.as_str().len()
        + m.name
            .as_ref()
            .map_or(0, |n| n.len() + TOKENS_PER_NAME as usize)
        + m.tool_call_id.as_ref().map_or(0, String::len);
    let calls = m
        .tool_calls
        .iter()
        .map(|c| c.id.len() + c.name.len() + c.arguments.len() + TOOL_CALL_OVERHEAD as usize)
        .sum::<usize>();
    texts + calls
}

/// A hash of everything counting reads from a canonical message: one seeded hash of a record
/// written into `record` (cleared first, reused across messages). Every field is framed by its
/// length, and a field longer than a digest is written as its own 128-bit hash, so a long text
/// is hashed in one pass rather than streamed piece by piece; no two different messages write
/// the same record unless two of their texts' digests collide. The tag keeps these keys apart
/// from keys of chat JSON. Keys live only in this process's caches: nothing persists them.
fn content_key(m: &Message, seed: u64, record: &mut Vec<u8>) -> u128 {
    record.clear();
    let mut put = |bytes: &[u8]| {
        record.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        if bytes.len() <= DIGEST_BYTES {
            record.extend_from_slice(bytes);
        } else {
            record.extend_from_slice(&xxhash_rust::xxh3::xxh3_128(bytes).to_le_bytes());
        }
    };
    put(b"canonical");
    put(m.role.as_str().as_bytes());
    put(m.name.as_deref().unwrap_or("\0").as_bytes());
    put(&(m.texts.len() as u64).to_le_bytes());
    for t in &m.texts {
        put(t.as_bytes());
    }
    put(&(m.images.len() as u64).to_le_bytes());
    for image in &m.images {
        let (width, height) = image.size.unwrap_or((0, 0));
        put(&[image.detail as u8, u8::from(image.size.is_some())]);
        put(&width.to_le_bytes());
        put(&height.to_le_bytes());
    }
    put(&m.other_part_tokens.to_le_bytes());
    put(&(m.tool_calls.len() as u64).to_le_bytes());
    for c in &m.tool_calls {
        put(c.id.as_bytes());
        put(c.name.as_bytes());
        put(c.arguments.as_bytes());
    }
    put(m.tool_call_id.as_deref().unwrap_or("\0").as_bytes());
    put(&[
        u8::from(m.is_error),
        u8::from(m.tool_call_id.is_some()),
        u8::from(m.name.is_some()),
    ]);
    put(&(m.bytes as u64).to_le_bytes());
    xxhash_rust::xxh3::xxh3_128_with_seed(record, seed)
}

/// Bytes of a field's digest in a content key's record: a field no longer is written as it is.
const DIGEST_BYTES: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{Detail, Image, Text, ToolCall};
    use proptest::prelude::*;

    fn key(m: &Message) -> u128 {
        content_key(m, 7, &mut Vec::new())
    }

    /// Strings around the digest's length, and some that differ only past it.
    fn piece() -> impl Strategy<Value = String> {
        let long = "x".repeat(DIGEST_BYTES);
        prop::sample::select(vec![
            String::new(),
            "a".to_owned(),
            "ab".to_owned(),
            "\0".to_owned(),
            long.clone(),
            format!("{long}a"),
            format!("{long}b"),
            format!("a{long}"),
            format!("{long}{long}"),
        ])
    }

    fn message() -> impl Strategy<Value = Message> {
        (
            prop::sample::select(vec![Role::User, Role::Assistant, Role::Tool]),
            prop::option::of(piece()),
            prop::collection::vec(piece(), 0..3),
            prop::collection::vec((piece(), piece(), piece()), 0..2),
            prop::option::of(piece()),
            prop::collection::vec(prop::option::of((0u32..2, 0u32..2)), 0..2),
            (any::<bool>(), 0u32..2, 0usize..2),
        )
            .prop_map(
                |(role, name, texts, calls, call_id, images, (err, other, bytes))| Message {
                    role,
                    name,
                    texts: texts.into_iter().map(Text::from).collect(),
                    images: images
                        .into_iter()
                        .map(|size| Image {
                            detail: Detail::Auto,
                            size,
                        })
                        .collect(),
                    other_part_tokens: other,
                    tool_calls: calls
                        .into_iter()
                        .map(|(id, name, arguments)| ToolCall {
                            id: id.into(),
                            name: name.into(),
                            arguments: arguments.into(),
                        })
                        .collect(),
                    tool_call_id: call_id,
                    is_error: err,
                    bytes,
                    framed_as: None,
                    folded: crate::view::Folded::default(),
                },
            )
    }

    proptest! {
        #[test]
        fn two_messages_share_a_content_key_only_when_equal(a in message(), b in message()) {
            prop_assert_eq!(key(&a) == key(&b), a == b, "{:?} / {:?}", a, b);
        }
    }

    #[test]
    fn the_framing_keeps_texts_apart_however_they_are_split() {
        let long = "y".repeat(3 * DIGEST_BYTES);
        let mut a = Message::text(Role::User, "");
        let mut b = a.clone();
        for (x, y) in [
            (vec!["ab", "c"], vec!["a", "bc"]),
            (vec![long.as_str(), ""], vec!["", long.as_str()]),
            (vec![&long[..20], &long[20..]], vec![long.as_str()]),
        ] {
            a.texts = x.into_iter().map(Text::from).collect();
            b.texts = y.into_iter().map(Text::from).collect();
            assert_ne!(key(&a), key(&b), "{:?} / {:?}", a.texts, b.texts);
        }
        b.texts.clone_from(&a.texts);
        assert_eq!(key(&a), key(&b));
        assert_ne!(
            content_key(&a, 1, &mut Vec::new()),
            content_key(&a, 2, &mut Vec::new())
        );
    }
}
