//! Readings of whole native requests, kept by what they were read from. A provider's canonical
//! view depends on neighbouring items (a turn, a compaction, a call and its answer), so its
//! counted view cannot be cached message by message as OpenAI Chat's is; an identical request
//! (a retry, a fallback to another model, `count_tokens` before `assemble`, a gateway replica
//! seeing a replayed body) is the unit that repeats. Planning is never cached: every call plans
//! its own budget on the kept reading. Bounded in entries and in the bytes of JSON read;
//! emptied with the count cache (`cache_clear`).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use xxhash_rust::xxh3::Xxh3;

use crate::cache::CountCache;
use crate::error::CoreError;
use crate::native::Native;
use crate::request::{Request, Scheme};

/// A native request read: its native facts and its canonical view, loaded and counted.
pub struct Reading {
    pub native: Native,
    pub request: Request<'static>,
    /// Bytes of JSON the items were read from.
    pub bytes: usize,
    /// The last count of what a plan of this reading sends merged (`NativeView.written`): a
    /// session asked again (a retry, the same turn assembled twice) asks for the same plan.
    pub sent: Mutex<Option<SentMemo>>,
}

/// The tokens a plan of `items` sends, its neighbours merged, behind a system of `markers`
/// cache markers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentMemo {
    pub items: Vec<crate::plan::Item>,
    pub markers: u32,
    pub tokens: u64,
}

/// Readings kept at most; a session's next turn is a new request, so only recent ones repeat.
const MAX_READINGS: usize = 64;
/// Bytes of JSON the kept readings were read from, at most (a reading holds its texts).
const MAX_BYTES: usize = 64 << 20;

#[derive(Default)]
struct Kept {
    readings: HashMap<u128, (Arc<Reading>, u64)>,
    bytes: usize,
    tick: u64,
}

static KEPT: LazyLock<Mutex<Kept>> = LazyLock::new(Mutex::default);

fn kept() -> std::sync::MutexGuard<'static, Kept> {
    // A poisoned lock only means a panic mid-insert elsewhere; the map is still a valid map.
    KEPT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a reading depends on besides its items, fed to a key.
pub struct Context<'a> {
    pub provider: &'a str,
    pub system: &'a [Vec<String>],
    pub tools: Option<&'a [u8]>,
    pub scheme: Scheme,
    /// The count cache its entries live in.
    pub cache: &'a CountCache,
}

impl<'a> Context<'a> {
    pub fn new(
        provider: &'a str,
        system: &'a [Vec<String>],
        tools: Option<&'a [u8]>,
        scheme: Scheme,
        cache: &'a CountCache,
    ) -> Context<'a> {
        Context {
            provider,
            system,
            tools,
            scheme,
            cache,
        }
    }

    /// The key of a reading of items identified by `items` (their keys or their JSON, each
    /// fed whole: the kind of identity is part of the tag).
    pub fn key<'i>(&self, tag: &[u8], items: impl Iterator<Item = &'i [u8]>) -> u128 {
        let mut h = Xxh3::new();
        let mut put = |bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        put(tag);
        put(self.provider.as_bytes());
        put(&self.scheme.seed().to_le_bytes());
        put(&self.scheme.ratio_milli.to_le_bytes());
        put(&(self.cache as *const CountCache as usize).to_le_bytes());
        match self.tools {
            Some(tools) => put(tools),
            None => put(b"\xffno tools"),
        }
        put(&(self.system.len() as u64).to_le_bytes());
        for texts in self.system {
            put(&(texts.len() as u64).to_le_bytes());
            for text in texts {
                put(text.as_bytes());
            }
        }
        for item in items {
            put(item);
        }
        h.digest128()
    }
}

/// The reading kept under `key`, checked by `check` (the caller's limits), or the one `read`
/// makes, kept.
pub fn kept_or_read(
    key: u128,
    check: impl FnOnce(&Reading) -> Result<(), CoreError>,
    read: impl FnOnce() -> Result<Reading, CoreError>,
) -> Result<Arc<Reading>, CoreError> {
    if let Some(reading) = get(key) {
        check(&reading)?;
        return Ok(reading);
    }
    let reading = Arc::new(read()?);
    insert(key, Arc::clone(&reading));
    Ok(reading)
}

/// The reading kept under `key`.
pub fn get(key: u128) -> Option<Arc<Reading>> {
    let mut kept = kept();
    kept.tick += 1;
    let tick = kept.tick;
    let (reading, used) = kept.readings.get_mut(&key)?;
    *used = tick;
    Some(Arc::clone(reading))
}

/// Keeps `reading` under `key`, the least recently used ones going first when full; a reading
/// larger than the whole bound is not kept.
pub fn insert(key: u128, reading: Arc<Reading>) {
    if reading.bytes > MAX_BYTES {
        return;
    }
    // Readings let go are dropped once the lock is released: freeing a long session's
    // canonical messages takes as long as a warm plan, and other threads wait on the lock.
    let mut gone = Vec::new();
    let mut kept = kept();
    kept.tick += 1;
    let tick = kept.tick;
    while !kept.readings.is_empty()
        && (kept.readings.len() >= MAX_READINGS || kept.bytes + reading.bytes > MAX_BYTES)
    {
        let oldest = kept
            .readings
            .iter()
            .min_by_key(|(_, (_, used))| *used)
            .map(|(k, _)| *k);
        if let Some((old, _)) = oldest.and_then(|k| kept.readings.remove(&k)) {
            kept.bytes -= old.bytes;
            gone.push(old);
        }
    }
    kept.bytes += reading.bytes;
    if let Some((old, _)) = kept.readings.insert(key, (reading, tick)) {
        kept.bytes -= old.bytes;
        gone.push(old);
    }
    drop(kept);
    drop(gone);
}

/// Forgets every reading (what `cache_clear` does to every cache).
pub fn clear() {
    let mut kept = kept();
    let gone = std::mem::take(&mut kept.readings);
    kept.bytes = 0;
    drop(kept);
    drop(gone);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::{Backend, Encoding};
    use crate::request::load_canonical;

    fn reading(text: &str, bytes: usize) -> Arc<Reading> {
        let json = format!(r#"[{{"role":"user","content":"{text}"}}]"#);
        let mut native = crate::native::read("anthropic", &[json.as_bytes()], &[]).unwrap();
        let scheme = Scheme::openai(Encoding::O200kBase, Backend::BpeOpenai);
        let messages = std::mem::take(&mut native.messages);
        let request = load_canonical(messages, None, scheme, crate::cache::global()).unwrap();
        Arc::new(Reading {
            native,
            request,
            bytes,
            sent: Mutex::default(),
        })
    }

    #[test]
    fn keys_tell_apart_what_a_reading_depends_on() {
        let cache = CountCache::new(16, 1 << 20);
        let other = CountCache::new(16, 1 << 20);
        let system = [vec!["rules".to_owned()]];
        let scheme = Scheme::openai(Encoding::O200kBase, Backend::BpeOpenai);
        let at =
            |provider, system, tools, cache| Context::new(provider, system, tools, scheme, cache);
        let base = at("anthropic", &system, None, &cache);
        let key = |c: &Context, items: &[&[u8]]| c.key(b"json", items.iter().copied());
        let k = key(&base, &[b"[1]"]);
        assert_eq!(k, key(&at("anthropic", &system, None, &cache), &[b"[1]"]));
        for changed in [
            key(&base, &[b"[2]"]),
            key(&base, &[b"[", b"1]"]),
            key(&at("gemini", &system, None, &cache), &[b"[1]"]),
            key(&at("anthropic", &[], None, &cache), &[b"[1]"]),
            key(&at("anthropic", &system, Some(b"[]"), &cache), &[b"[1]"]),
            key(&at("anthropic", &system, None, &other), &[b"[1]"]),
            base.key(b"objects", [b"[1]".as_slice()].into_iter()),
        ] {
            assert_ne!(changed, k);
        }
    }

    #[test]
    fn the_least_recently_used_go_first_and_clear_forgets_all() {
        clear();
        let big = MAX_BYTES / 2 + 1;
        insert(1, reading("one", big));
        insert(2, reading("two", 10));
        assert!(get(1).is_some(), "used: kept over 2");
        insert(3, reading("three", big));
        assert!(get(2).is_none() || get(1).is_none(), "over the byte bound");
        assert!(get(3).is_some());
        insert(4, reading("huge", MAX_BYTES + 1));
        assert!(get(4).is_none(), "larger than the bound: not kept");
        for k in 10..10 + MAX_READINGS as u128 + 5 {
            insert(k, reading("many", 1));
        }
        assert!(kept().readings.len() <= MAX_READINGS);
        clear();
        assert!(get(3).is_none() && kept().bytes == 0);
    }
}
