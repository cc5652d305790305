//! Loading a request: split the provider's messages, look each one up in the cache by the hash
//! of its bytes, parse only the misses, and count tokens only when the plan asks. Limits are
//! checked before any work that grows with the input, so an oversized request is refused in
//! microseconds.

use std::borrow::Cow;
use std::sync::Arc;

use crate::cache::{CountCache, Entry};
use crate::count::chat::{message_tokens_bound, message_tokens_until, message_tokens_with};
use crate::count::image_price::ImageFormula;
use crate::count::tools::tools_tokens;
use crate::count::{counter, Backend, Counter, Encoding};
use crate::error::CoreError;
use crate::json_array;
use crate::ledger;
use crate::plan::SYNTHESIZED_RESULT_TEXT;
use crate::providers::openai_chat;
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

    fn scale(self, tokens: u32) -> u32 {
        if self.ratio_milli == 1000 {
            return tokens;
        }
        let scaled = (u64::from(tokens) * u64::from(self.ratio_milli)).div_ceil(1000);
        u32::try_from(scaled).unwrap_or(u32::MAX)
    }

    /// Cache seed: counts depend on the encoding only (backends are exact and equal), and the
    /// accounting version is part of the key so a change of framing never reads stale counts.
    fn seed(self) -> u64 {
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
            && full.texts[0] == SYNTHESIZED_RESULT_TEXT);
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

    /// Exact tokens of message `i`, counted now if no assembly has needed them before.
    pub fn tokens(&self, i: usize) -> u32 {
        let exact = *self.entries[i]
            .tokens
            .get_or_init(|| self.count(i, u32::MAX).unwrap_or(u32::MAX));
        self.scheme.scale(exact)
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
            Source::Raw(raw) => match openai_chat::parse_raw(i, raw) {
                Ok(full) => message_tokens_until(&full, counter, images, limit),
                // The same bytes parsed once already; should they somehow not now, the bound
                // still keeps the budget.
                Err(_) => Some(entry.bound).filter(|&b| b <= limit),
            },
        }
    }

    /// Message `i` with every text, for a stage that rewrites it (the cache keeps only what
    /// planning reads, so a message taken from it is parsed again).
    pub fn full(&self, i: usize) -> Cow<'_, Message> {
        match &self.sources[i] {
            Source::Parsed(full) => Cow::Borrowed(full),
            Source::Entry => Cow::Borrowed(&self.entries[i].message),
            Source::Raw(raw) => openai_chat::parse_raw(i, raw)
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
                        .map_or_else(|_| c.arguments.clone(), |v| v.to_string());
                    xxhash_rust::xxh3::xxh3_64(format!("{}\0{args}", c.name).as_bytes())
                })
                .collect()
        })
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

fn check_size(json: &[&[u8]], tools: Option<&[u8]>, limits: Limits) -> Result<(), CoreError> {
    let bytes = json.iter().map(|part| part.len()).sum::<usize>() + tools.map_or(0, <[u8]>::len);
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
    check_size(json, tools, limits)?;
    let mut raws = Vec::new();
    for part in json {
        raws.extend(json_array::split(part)?);
    }
    if raws.len() > limits.max_messages {
        return Err(CoreError::InvalidMessage {
            index: None,
            reason: format!(
                "the request has {} messages, over max_messages = {}",
                raws.len(),
                limits.max_messages
            ),
        });
    }
    let seed = scheme.seed();
    let mut entries = Vec::with_capacity(raws.len());
    let mut sources = Vec::with_capacity(raws.len());
    let mut bytes_from_end: usize = raws.iter().map(|raw| raw.len()).sum();
    for (i, raw) in raws.into_iter().enumerate() {
        let in_tail = bytes_from_end <= KEEP_PARSED_TAIL_BYTES;
        bytes_from_end -= raw.len();
        let key = CountCache::key(raw, seed);
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
    let counter = scheme.counter();
    let tools_tokens = match tools {
        None => 0,
        Some(bytes) => {
            let value: serde_json::Value =
                serde_json::from_slice(bytes).map_err(|e| CoreError::InvalidMessage {
                    index: None,
                    reason: format!("tools must be a JSON array ({e})"),
                })?;
            u64::from(scheme.scale(tools_tokens(&value, counter)?))
        }
    };
    Ok(Request {
        entries,
        sources,
        scheme,
        tools_tokens,
    })
}
