//! Parsed native items by the hash of their JSON, one cache per provider. A session sends its
//! history again on every turn: parsing it again was most of reading a native request, and
//! hashing its bytes costs a fraction of that. Sharded so threads rarely contend; bounded in
//! entries and in the bytes of JSON the items were read from, a full shard being cleared
//! (which costs only parsing again).

use rustc_hash::FxHashMap as HashMap;
use std::sync::{Arc, Mutex};

use xxhash_rust::xxh3::xxh3_128_with_seed;

const SHARDS: usize = 16;
/// About 64 MiB of items per provider: a few hundred long sessions.
const SHARD_BYTES: usize = 4 << 20;
const SHARD_ENTRIES: usize = 16_384;

pub struct ItemCache<T> {
    shards: Vec<Mutex<Shard<T>>>,
    /// Keys of one provider's items never meet another's, even for the same bytes.
    seed: u64,
}

struct Shard<T> {
    /// Each item and the bytes of JSON it was read from.
    items: HashMap<u128, (Arc<T>, usize)>,
    bytes: usize,
}

impl<T> ItemCache<T> {
    pub fn new(seed: u64) -> Self {
        ItemCache {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        items: HashMap::default(),
                        bytes: 0,
                    })
                })
                .collect(),
            seed,
        }
    }

    /// What keys of this cache are seeded with (its provider's, for object keys too).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn key(&self, raw: &[u8]) -> u128 {
        xxh3_128_with_seed(raw, self.seed)
    }

    fn shard(&self, key: u128) -> std::sync::MutexGuard<'_, Shard<T>> {
        // A poisoned shard only means another thread panicked mid-insert; the map is still a
        // valid map of items.
        let shard = &self.shards[(key as usize) % SHARDS];
        shard
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn get(&self, key: u128) -> Option<Arc<T>> {
        self.get_sized(key).map(|(item, _)| item)
    }

    /// The item and the bytes of JSON it was read from.
    pub fn get_sized(&self, key: u128) -> Option<(Arc<T>, usize)> {
        self.shard(key).items.get(&key).cloned()
    }

    /// Keeps `item`, read from `bytes` bytes of JSON; an item larger than a shard is not kept.
    pub fn insert(&self, key: u128, item: Arc<T>, bytes: usize) {
        if bytes > SHARD_BYTES {
            return;
        }
        let mut shard = self.shard(key);
        if shard.items.len() >= SHARD_ENTRIES || shard.bytes + bytes > SHARD_BYTES {
            shard.items.clear();
            shard.bytes = 0;
        }
        if shard.items.insert(key, (item, bytes)).is_none() {
            shard.bytes += bytes;
        }
    }

    pub fn clear(&self) {
        for shard in &self.shards {
            let mut shard = shard
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            shard.items.clear();
            shard.bytes = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_is_found_by_its_bytes_and_a_full_shard_starts_over() {
        let cache = ItemCache::new(7);
        let key = cache.key(b"{\"role\":\"user\"}");
        assert!(cache.get(key).is_none());
        cache.insert(key, Arc::new(1u32), 15);
        assert_eq!(cache.get(key).as_deref(), Some(&1));
        assert_ne!(ItemCache::<u32>::new(8).key(b"{\"role\":\"user\"}"), key);
        cache.insert(key ^ (1 << 100), Arc::new(2), SHARD_BYTES); // the same shard, filling it
        assert!(cache.get(key).is_none());
        cache.insert(key, Arc::new(3), SHARD_BYTES + 1);
        assert!(
            cache.get(key).is_none(),
            "an item larger than a shard is not kept"
        );
    }
}
