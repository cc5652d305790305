//! Parsed, counted messages cached by content hash. A gateway sees the same history again on
//! every turn, so a message is parsed and tokenized once; afterwards it costs one hash of its
//! bytes. Sharded so threads assembling different sessions rarely contend; bounded in entries
//! and bytes so memory cannot grow with traffic (a full shard is cleared, which costs only
//! recounts).

use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use xxhash_rust::xxh3::xxh3_128_with_seed;

use crate::view::Message;

const SHARDS: usize = 16;

/// A parsed message as the cache keeps it.
#[derive(Debug)]
pub struct Entry {
    /// The message. Its `texts` are kept only where the plan reads them (a ledger note, a
    /// synthesized result); everything else needs them only to be counted.
    pub message: Message,
    /// Exact tokens, once some assembly needed them.
    pub tokens: OnceLock<u32>,
    /// Upper bound of the tokens from the message's size.
    pub bound: u32,
    /// One more than the tokens the message is known to exceed, from a count stopped at a
    /// limit (0 while none has been): the message at the budget's edge is asked about again
    /// on every turn, with less room each time, and the answer is then known without parsing
    /// or counting it again.
    more_than: AtomicU32,
    /// For each tool call, a hash of its tool name and its arguments as canonical JSON: how
    /// `dedupe_superseded_reads` recognizes the same read, parsed once per message.
    pub call_keys: OnceLock<Vec<u64>>,
    /// The message's identifiers, hashed (`identifiers::of_message`): which results later
    /// turns cite, found once per message.
    pub identifiers: OnceLock<Vec<u64>>,
}

impl Entry {
    pub fn new(message: Message, bound: u32) -> Entry {
        Entry {
            message,
            tokens: OnceLock::new(),
            bound,
            more_than: AtomicU32::new(0),
            call_keys: OnceLock::new(),
            identifiers: OnceLock::new(),
        }
    }

    /// Whether the message is known to have more than `limit` tokens.
    pub fn exceeds(&self, limit: u32) -> bool {
        self.more_than.load(Ordering::Relaxed) >= limit.saturating_add(1)
            || self.tokens.get().is_some_and(|&t| t > limit)
    }

    /// Records that a count found more than `limit` tokens.
    pub fn found_more_than(&self, limit: u32) {
        self.more_than
            .fetch_max(limit.saturating_add(1), Ordering::Relaxed);
    }

    /// Approximate heap bytes of the entry, for the cache's byte bound.
    fn size(&self) -> usize {
        let m = &self.message;
        std::mem::size_of::<Entry>()
            + m.texts.iter().map(|t| t.len()).sum::<usize>()
            + m.name.as_ref().map_or(0, String::len)
            + m.tool_call_id.as_ref().map_or(0, String::len)
            + m.tool_calls
                .iter()
                .map(|c| c.id.len() + c.name.len() + c.arguments.len() + 72)
                .sum::<usize>()
            + m.images.len() * 16
    }
}

#[derive(Default)]
struct Shard {
    map: HashMap<u128, Arc<Entry>>,
    bytes: usize,
}

/// A shard on cache lines of its own: two threads locking neighbouring shards would otherwise
/// take the same line from each other's core on every lookup.
#[repr(align(128))]
#[derive(Default)]
struct Padded(Mutex<Shard>);

pub struct CountCache {
    shards: Vec<Padded>,
    per_shard_entries: usize,
    per_shard_bytes: usize,
}

impl CountCache {
    /// A cache holding at most about `max_entries` messages and `max_bytes` bytes; either
    /// bound at 0 disables it.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        CountCache {
            shards: (0..SHARDS).map(|_| Padded::default()).collect(),
            per_shard_entries: max_entries.div_ceil(SHARDS),
            per_shard_bytes: max_bytes.div_ceil(SHARDS),
        }
    }

    /// The key of a serialized message under one counting scheme (`seed` tells encodings
    /// apart, so one cache serves them all).
    pub fn key(raw: &[u8], seed: u64) -> u128 {
        xxh3_128_with_seed(raw, seed)
    }

    pub fn enabled(&self) -> bool {
        self.per_shard_entries > 0 && self.per_shard_bytes > 0
    }

    fn shard(&self, key: u128) -> std::sync::MutexGuard<'_, Shard> {
        self.locked(shard_of(key))
    }

    fn locked(&self, shard: usize) -> std::sync::MutexGuard<'_, Shard> {
        // A poisoned shard only means another thread panicked mid-insert; the map is still a
        // valid map of entries, so keep using it.
        self.shards[shard]
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, key: u128) -> Option<Arc<Entry>> {
        if !self.enabled() {
            return None;
        }
        self.shard(key).map.get(&key).cloned()
    }

    /// `get` of each key (None: no key, nothing looked up), each shard locked once rather
    /// than once per message of a long history, which other threads' lookups then waited on
    /// less often.
    pub fn get_many(&self, keys: &[Option<u128>]) -> Vec<Option<Arc<Entry>>> {
        let mut out = vec![None; keys.len()];
        if !self.enabled() {
            return out;
        }
        // The keys' positions ordered by shard (a counting sort), then each shard's run looked
        // up under one lock.
        let mut starts = [0usize; SHARDS + 1];
        for key in keys.iter().flatten() {
            starts[shard_of(*key) + 1] += 1;
        }
        for s in 0..SHARDS {
            starts[s + 1] += starts[s];
        }
        let mut next = starts;
        let mut order = vec![0usize; starts[SHARDS]];
        for (i, key) in keys.iter().enumerate() {
            if let Some(key) = key {
                let s = shard_of(*key);
                order[next[s]] = i;
                next[s] += 1;
            }
        }
        for s in 0..SHARDS {
            let run = &order[starts[s]..starts[s + 1]];
            if run.is_empty() {
                continue;
            }
            let shard = self.locked(s);
            for &i in run {
                out[i] = keys[i].and_then(|key| shard.map.get(&key).cloned());
            }
        }
        out
    }

    pub fn insert(&self, key: u128, entry: Arc<Entry>) {
        if !self.enabled() {
            return;
        }
        let size = entry.size();
        if size > self.per_shard_bytes {
            return;
        }
        let mut shard = self.shard(key);
        if shard.map.len() >= self.per_shard_entries || shard.bytes + size > self.per_shard_bytes {
            shard.map.clear();
            shard.bytes = 0;
        }
        if let Some(old) = shard.map.insert(key, entry) {
            shard.bytes -= old.size();
        }
        shard.bytes += size;
    }

    /// Messages held.
    pub fn len(&self) -> usize {
        (0..SHARDS)
            .map(|i| {
                self.shards[i]
                    .0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .map
                    .len()
            })
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate bytes held.
    pub fn bytes(&self) -> usize {
        (0..SHARDS)
            .map(|i| {
                self.shards[i]
                    .0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .bytes
            })
            .sum()
    }

    pub fn clear(&self) {
        for shard in &self.shards {
            let mut shard = shard.0.lock().unwrap_or_else(|e| e.into_inner());
            shard.map.clear();
            shard.bytes = 0;
        }
    }
}

fn shard_of(key: u128) -> usize {
    (key as usize) % SHARDS
}

/// Messages the process-wide cache holds at most.
pub const DEFAULT_MAX_ENTRIES: usize = 1 << 18;
/// Bytes the process-wide cache holds at most.
pub const DEFAULT_MAX_BYTES: usize = 256 << 20;

/// The process-wide cache every assembly shares unless given its own.
pub fn global() -> &'static CountCache {
    static GLOBAL: OnceLock<CountCache> = OnceLock::new();
    GLOBAL.get_or_init(|| CountCache::new(DEFAULT_MAX_ENTRIES, DEFAULT_MAX_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Role;

    fn entry(text: &str) -> Arc<Entry> {
        Arc::new(Entry::new(Message::text(Role::User, text), 0))
    }

    #[test]
    fn remembers_and_stays_bounded_in_entries() {
        let cache = CountCache::new(32, usize::MAX);
        for n in 0..1000u32 {
            let key = CountCache::key(&n.to_le_bytes(), 7);
            cache.insert(key, entry("x"));
            assert!(cache.get(key).is_some());
        }
        assert!(cache.len() <= 32);
    }

    #[test]
    fn stays_bounded_in_bytes() {
        let cache = CountCache::new(usize::MAX, 64 * 1024);
        let text = "y".repeat(1000);
        for n in 0..1000u32 {
            cache.insert(CountCache::key(&n.to_le_bytes(), 7), entry(&text));
        }
        assert!(cache.bytes() <= 64 * 1024, "{} bytes", cache.bytes());
        assert!(!cache.is_empty());
    }

    #[test]
    fn remembers_what_a_message_exceeds() {
        let e = entry("x");
        assert!(!e.exceeds(0));
        e.found_more_than(10);
        e.found_more_than(4);
        assert!(e.exceeds(10) && e.exceeds(3) && !e.exceeds(11));
        let counted = entry("x");
        counted.tokens.set(7).unwrap();
        assert!(counted.exceeds(6) && !counted.exceeds(7));
    }

    #[test]
    fn looks_up_many_keys_as_one_at_a_time() {
        let cache = CountCache::new(1 << 12, usize::MAX);
        let keys: Vec<u128> = (0..200u32)
            .map(|n| CountCache::key(&n.to_le_bytes(), 7))
            .collect();
        for (n, &key) in keys.iter().enumerate().step_by(3) {
            cache.insert(key, entry(&n.to_string()));
        }
        // Every shard met, some keys held, some not, and positions with no key at all.
        let asked: Vec<Option<u128>> = keys
            .iter()
            .enumerate()
            .map(|(n, &k)| (n % 7 != 0).then_some(k))
            .collect();
        let many = cache.get_many(&asked);
        assert_eq!(many.len(), asked.len());
        for (got, key) in many.iter().zip(&asked) {
            let one = key.and_then(|k| cache.get(k));
            assert_eq!(got.as_ref().map(Arc::as_ptr), one.as_ref().map(Arc::as_ptr));
        }
        assert!(many.iter().filter(|e| e.is_some()).count() > 40);
        assert!(CountCache::new(0, 1)
            .get_many(&asked)
            .iter()
            .all(Option::is_none));
    }

    #[test]
    fn seed_separates_schemes_and_zero_disables() {
        assert_ne!(CountCache::key(b"x", 1), CountCache::key(b"x", 2));
        let off = CountCache::new(0, 1 << 20);
        off.insert(1, entry("x"));
        assert!(off.get(1).is_none());
    }
}
