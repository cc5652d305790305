//! Loading a request: parse the provider's messages into the canonical view and count every
//! message (through the cache) and the tools schema. Limits are checked before any work that
//! grows with the input, so an oversized request is refused in microseconds.

use crate::cache::CountCache;
use crate::count::chat::message_tokens;
use crate::count::tools::tools_tokens;
use crate::count::{counter, Backend, Counter, Encoding};
use crate::error::CoreError;
use crate::providers::openai_chat;
use crate::view::Message;

/// How tokens are counted: which encoding, by which exact backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheme {
    pub encoding: Encoding,
    pub backend: Backend,
}

impl Scheme {
    pub fn counter(self) -> &'static dyn Counter {
        counter(self.encoding, self.backend)
    }

    /// Cache seed: counts depend on the encoding only (backends are exact and equal), but the
    /// framing version is part of the key so a change of accounting never reads stale counts.
    fn seed(self) -> u64 {
        const FRAMING_VERSION: u64 = 1;
        let enc = match self.encoding {
            Encoding::O200kBase => 1,
            Encoding::Cl100kBase => 2,
        };
        (FRAMING_VERSION << 8) | enc
    }
}

/// Size limits a request must respect before it is parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_messages: usize,
    pub max_request_bytes: usize,
}

/// A parsed, counted request.
pub struct Request {
    pub messages: Vec<Message>,
    /// Tokens of each message, framing included.
    pub tokens: Vec<u32>,
    /// Tokens of the tools schema (0 without tools).
    pub tools_tokens: u64,
}

impl Request {
    pub fn message_tokens(&self) -> u64 {
        self.tokens.iter().map(|&t| u64::from(t)).sum()
    }
}

fn check_size(json: &[u8], tools: Option<&[u8]>, limits: Limits) -> Result<(), CoreError> {
    let bytes = json.len() + tools.map_or(0, <[u8]>::len);
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

/// Parses and counts OpenAI Chat Completions messages (and the `tools` parameter).
pub fn load_openai_chat(
    json: &[u8],
    tools: Option<&[u8]>,
    scheme: Scheme,
    limits: Limits,
    cache: &CountCache,
) -> Result<Request, CoreError> {
    check_size(json, tools, limits)?;
    let parsed = openai_chat::parse_messages(json)?;
    if parsed.len() > limits.max_messages {
        return Err(CoreError::InvalidMessage {
            index: None,
            reason: format!(
                "the request has {} messages, over max_messages = {}",
                parsed.len(),
                limits.max_messages
            ),
        });
    }
    let counter = scheme.counter();
    let seed = scheme.seed();
    let mut messages = Vec::with_capacity(parsed.len());
    let mut tokens = Vec::with_capacity(parsed.len());
    for p in parsed {
        let key = CountCache::key(p.raw.as_bytes(), seed);
        let t = match cache.get(key) {
            Some(t) => t,
            None => {
                let t = message_tokens(&p.message, counter);
                cache.insert(key, t);
                t
            }
        };
        tokens.push(t);
        messages.push(p.message);
    }
    let tools_tokens = match tools {
        None => 0,
        Some(bytes) => {
            let value: serde_json::Value =
                serde_json::from_slice(bytes).map_err(|e| CoreError::InvalidMessage {
                    index: None,
                    reason: format!("tools must be a JSON array ({e})"),
                })?;
            u64::from(tools_tokens(&value, counter)?)
        }
    };
    Ok(Request {
        messages,
        tokens,
        tools_tokens,
    })
}
