//! Token counts cached by content hash. A gateway sees the same history again on every turn,
//! so a message is tokenized once and afterwards costs one hash of its bytes. Sharded so
//! threads assembling different sessions rarely contend; bounded so memory cannot grow with
//! traffic (a full shard is cleared, which costs only recounts).

use std::collections::HashMap;
use std::sync::Mutex;

use xxhash_rust::xxh3::xxh3_128_with_seed;

const SHARDS: usize = 16;

pub struct CountCache {
    shards: Vec<Mutex<HashMap<u128, u32>>>,
    per_shard: usize,
}

impl CountCache {
    /// A cache holding at most about `max_entries` counts; 0 disables it.
    pub fn new(max_entries: usize) -> Self {
        CountCache {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: max_entries.div_ceil(SHARDS),
        }
    }

    /// The key of a serialized message under one counting scheme (`seed` tells encodings and
    /// backends apart, so one cache serves them all).
    pub fn key(raw: &[u8], seed: u64) -> u128 {
        xxh3_128_with_seed(raw, seed)
    }

    fn shard(&self, key: u128) -> &Mutex<HashMap<u128, u32>> {
        &self.shards[(key as usize) % SHARDS]
    }

    pub fn get(&self, key: u128) -> Option<u32> {
        if self.per_shard == 0 {
            return None;
        }
        // A poisoned shard only means another thread panicked mid-insert; the map is still a
        // valid map of counts, so keep using it.
        let shard = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        shard.get(&key).copied()
    }

    pub fn insert(&self, key: u128, tokens: u32) {
        if self.per_shard == 0 {
            return;
        }
        let mut shard = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        if shard.len() >= self.per_shard {
            shard.clear();
        }
        shard.insert(key, tokens);
    }

    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&self) {
        for shard in &self.shards {
            shard.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }
}

/// Entries of the process-wide cache: about 10 MiB of counts.
pub const DEFAULT_MAX_ENTRIES: usize = 1 << 18;

/// The process-wide cache every assembly shares unless told otherwise.
pub fn global() -> &'static CountCache {
    static GLOBAL: std::sync::OnceLock<CountCache> = std::sync::OnceLock::new();
    GLOBAL.get_or_init(|| CountCache::new(DEFAULT_MAX_ENTRIES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_and_stays_bounded() {
        let cache = CountCache::new(32);
        for n in 0..1000u32 {
            let key = CountCache::key(&n.to_le_bytes(), 7);
            cache.insert(key, n);
            assert_eq!(cache.get(key), Some(n));
        }
        assert!(cache.len() <= 32);
    }

    #[test]
    fn seed_separates_schemes_and_zero_disables() {
        assert_ne!(CountCache::key(b"x", 1), CountCache::key(b"x", 2));
        let off = CountCache::new(0);
        off.insert(1, 5);
        assert_eq!(off.get(1), None);
    }
}
