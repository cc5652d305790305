//! Where a session's translation left off, kept so that its next turn resumes there. A gateway
//! translates the same growing session on every turn: the history it sends is the last one
//! plus a few items, and translating all of it again (parsing, reading, writing and
//! serializing half a megabyte) was six to twelve times an assembly of it. A checkpoint holds
//! what the translation of the items before a cut left: the target's items no later turn
//! changes, as the bytes they were written as; the writer's state (the last item, which a
//! later turn may merge into, and the call ids given); and the report's changes so far. It is
//! found by the hash of the history's bytes up to the cut, under the source, the target, the
//! options and the system, so a checkpoint is used only for exactly the items it was made
//! from; what comes after the cut is translated as before, and the output is byte for byte
//! the translation from scratch (`tests::resumed_is_byte_identical`).
//!
//! A cut goes where every stage restarts cleanly: at the first turn of a source item, after
//! the latest compaction (which decides what before it is left out), past the leading system
//! turns (which make the target's system), where the source's reader carries nothing over
//! (OpenAI Responses joins an assistant's consecutive items; Gemini answers id-less responses
//! from the latest model content). Bounded in entries and bytes; the oldest goes first;
//! emptied by `cache_clear`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde_json::Value;
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use super::portable::{Part, Speaker, Turn};
use super::report::Change;
use super::write::State;
use super::{Options, Reasoning, Unsupported};

/// What the translation of a session's items before a cut left.
pub struct Checkpoint {
    /// The writer's state at the cut's first turn.
    pub state: State,
    /// The `state.closed` items written before the cut, each as its JSON.
    pub items: Vec<Arc<[u8]>>,
    /// The target's top-level system, which the leading system turns made.
    pub system: Option<Value>,
    /// The changes of the items before the cut: what their readers left out, what settling
    /// them changed, what writing them changed (the report lists all of each in that order).
    pub left_out: Vec<Change>,
    pub settled: Vec<Change>,
    pub written: Vec<Change>,
}

impl Checkpoint {
    /// Approximate heap bytes, for the bound.
    fn size(&self) -> usize {
        let changes = |c: &[Change]| {
            c.iter()
                .map(|c| c.what.len() + c.detail.len() + 64)
                .sum::<usize>()
        };
        let ids = &self.state.ids;
        std::mem::size_of::<Checkpoint>()
            + self.items.iter().map(|i| i.len() + 16).sum::<usize>()
            + self.state.out.iter().map(approx_value_size).sum::<usize>()
            + ids.size()
            + self
                .state
                .names
                .iter()
                .map(|(k, v)| k.len() + v.len() + 48)
                .sum::<usize>()
            + changes(&self.left_out)
            + changes(&self.settled)
            + changes(&self.written)
    }
}

fn approx_value_size(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len() + 32,
        Value::Array(a) => 32 + a.iter().map(approx_value_size).sum::<usize>(),
        Value::Object(o) => {
            32 + o
                .iter()
                .map(|(k, v)| k.len() + 32 + approx_value_size(v))
                .sum::<usize>()
        }
        _ => 32,
    }
}

/// The seed of the keys of a translation's checkpoints: what its output depends on besides
/// the history (the source's top-level system as JSON; tools are written apart, each time).
pub fn seed(source: &str, target: &str, options: &Options, system: Option<&Value>) -> u64 {
    let mut h = Xxh3::new();
    for part in [source, "\0", target, "\0"] {
        h.update(part.as_bytes());
    }
    h.update(&[
        matches!(options.reasoning, Reasoning::Text) as u8,
        matches!(options.unsupported, Unsupported::Placeholder) as u8,
        options.gemini_sentinel as u8,
    ]);
    if let Some(system) = system {
        h.update(&serde_json::to_vec(system).unwrap_or_default());
    }
    xxh3_64(&h.digest128().to_le_bytes())
}

/// The key of a checkpoint at each item boundary of `history` (the array's JSON; `starts`,
/// where each element begins): `keys[r]` for the cut before item `r`, from its bytes up to
/// there. One pass over the history.
pub fn keys(seed: u64, history: &[u8], starts: &[usize]) -> Vec<u128> {
    let mut h = Xxh3::with_seed(seed);
    let mut at = 0;
    starts
        .iter()
        .map(|&start| {
            h.update(&history[at..start]);
            at = start;
            h.digest128()
        })
        .collect()
}

/// The source item a checkpoint of this translation goes before, if any: the last one where
/// every stage restarts cleanly. `turns` are the turns read (before settling) of the items
/// translated in this run; `fresh`, whether the run started from the first item (the leading
/// system turns are then among them).
pub fn cut(source: &str, turns: &[Turn], fresh: bool) -> Option<usize> {
    let latest = turns
        .iter()
        .rposition(|t| t.parts.iter().any(|p| matches!(p, Part::Compaction { .. })));
    let floor = latest.unwrap_or(0);
    // Past a turn no settling drops that is not an instruction: the leading system is over.
    let mut spoken = !fresh;
    let mut best = None;
    for t in 1..turns.len() {
        spoken |= t > floor && !turns[t - 1].speaker.is_instruction();
        let clean = turns[t].item != turns[t - 1].item
            && latest.is_none_or(|l| t > l)
            && spoken
            && match source {
                "openai_responses" => turns[t - 1].speaker != Speaker::Assistant,
                "gemini" => turns[t].speaker == Speaker::Assistant,
                _ => true,
            };
        if clean {
            best = Some(turns[t].item);
        }
    }
    best
}

/// Checkpoints by key, bounded.
pub struct Checkpoints {
    kept: Mutex<Kept>,
    max_entries: usize,
    max_bytes: usize,
    /// Translations resumed from a checkpoint found (`find`), to tell a resumed path from
    /// one that only ever started over.
    hits: AtomicUsize,
}

#[derive(Default)]
struct Kept {
    map: HashMap<u128, (Arc<Checkpoint>, usize, u64)>,
    bytes: usize,
    tick: u64,
}

impl Checkpoints {
    /// At most `max_entries` checkpoints of `max_bytes` bytes in all; either at 0 keeps none.
    pub fn new(max_entries: usize, max_bytes: usize) -> Checkpoints {
        Checkpoints {
            kept: Mutex::default(),
            max_entries,
            max_bytes,
            hits: AtomicUsize::new(0),
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        // A poisoned lock only means a panic mid-insert elsewhere; the map is still a map.
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn enabled(&self) -> bool {
        self.max_entries > 0 && self.max_bytes > 0
    }

    /// The checkpoint at the latest cut of `keys` (`keys[r]`: before item `r`) held, with
    /// its item.
    pub fn find(&self, keys: &[u128]) -> Option<(usize, Arc<Checkpoint>)> {
        if !self.enabled() {
            return None;
        }
        let mut kept = self.kept();
        kept.tick += 1;
        let tick = kept.tick;
        for (r, key) in keys.iter().enumerate().rev() {
            if let Some(entry) = kept.map.get_mut(key) {
                entry.2 = tick;
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Some((r, Arc::clone(&entry.0)));
            }
        }
        None
    }

    /// Keeps `checkpoint` under `key`, dropping the one at `superseded` (the checkpoint the
    /// translation resumed from: the session has moved past it) and the oldest while over a
    /// bound. One larger than the byte bound is not kept.
    pub fn insert(&self, key: u128, checkpoint: Checkpoint, superseded: Option<u128>) {
        if !self.enabled() {
            return;
        }
        let size = checkpoint.size();
        let mut kept = self.kept();
        if let Some(old) = superseded.and_then(|k| kept.map.remove(&k)) {
            kept.bytes -= old.1;
        }
        if size > self.max_bytes {
            return;
        }
        if let Some(old) = kept.map.remove(&key) {
            kept.bytes -= old.1;
        }
        while kept.map.len() >= self.max_entries || kept.bytes + size > self.max_bytes {
            let Some(oldest) = kept.map.iter().min_by_key(|(_, e)| e.2).map(|(k, _)| *k) else {
                break;
            };
            if let Some(old) = kept.map.remove(&oldest) {
                kept.bytes -= old.1;
            }
        }
        kept.tick += 1;
        let tick = kept.tick;
        kept.map.insert(key, (Arc::new(checkpoint), size, tick));
        kept.bytes += size;
    }

    /// Checkpoints held.
    pub fn len(&self) -> usize {
        self.kept().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate bytes held.
    pub fn bytes(&self) -> usize {
        self.kept().bytes
    }

    /// Checkpoints found so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::Relaxed)
    }

    pub fn clear(&self) {
        let mut kept = self.kept();
        kept.map.clear();
        kept.bytes = 0;
    }
}

/// Checkpoints the process keeps at most: a few hundred sessions' worth.
pub const MAX_ENTRIES: usize = 512;
/// Bytes of checkpoints the process keeps at most (a checkpoint holds about its session's
/// translated history).
pub const MAX_BYTES: usize = 128 << 20;

/// The process-wide checkpoints `translate_body` resumes from.
pub fn global() -> &'static Checkpoints {
    static GLOBAL: OnceLock<Checkpoints> = OnceLock::new();
    GLOBAL.get_or_init(|| Checkpoints::new(MAX_ENTRIES, MAX_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::write::State;

    fn checkpoint(bytes: usize) -> Checkpoint {
        Checkpoint {
            state: State::new("anthropic"),
            items: vec![Arc::from(vec![b'x'; bytes])],
            system: None,
            left_out: Vec::new(),
            settled: Vec::new(),
            written: Vec::new(),
        }
    }

    #[test]
    fn stays_bounded_in_entries_and_bytes_dropping_the_oldest() {
        let few = Checkpoints::new(4, usize::MAX);
        for key in 0..100u128 {
            few.insert(key, checkpoint(10), None);
            assert!(few.len() <= 4);
        }
        // The newest are kept, the oldest went.
        assert!(few.find(&[99]).is_some() && few.find(&[0]).is_none());
        let small = Checkpoints::new(usize::MAX, 64 << 10);
        for key in 0..100u128 {
            small.insert(key, checkpoint(10_000), None);
            assert!(small.bytes() <= 64 << 10, "{} bytes", small.bytes());
        }
        assert!(!small.is_empty());
        small.insert(1000, checkpoint(1 << 20), None);
        assert!(
            small.find(&[1000]).is_none(),
            "one over the bound is not kept"
        );
        small.clear();
        assert!(small.is_empty() && small.bytes() == 0);
    }

    #[test]
    fn a_checkpoint_the_session_moved_past_goes_and_the_latest_cut_wins() {
        let kept = Checkpoints::new(16, usize::MAX);
        kept.insert(1, checkpoint(1), None);
        kept.insert(2, checkpoint(1), None);
        assert_eq!(kept.find(&[7, 1, 2, 9]).map(|(r, _)| r), Some(2));
        kept.insert(3, checkpoint(1), Some(2));
        assert_eq!(kept.len(), 2);
        assert_eq!(kept.find(&[2]).map(|(r, _)| r), None);
        assert_eq!(kept.hits(), 1);
        let off = Checkpoints::new(0, usize::MAX);
        off.insert(1, checkpoint(1), None);
        assert!(off.find(&[1]).is_none());
    }

    #[test]
    fn keys_follow_the_bytes_up_to_each_item_and_the_seed() {
        let options = Options::new();
        let a = seed("openai_chat", "anthropic", &options, None);
        assert_ne!(a, seed("openai_chat", "gemini", &options, None));
        let text = Options {
            reasoning: Reasoning::Text,
            ..Options::new()
        };
        assert_ne!(a, seed("openai_chat", "anthropic", &text, None));
        let system = serde_json::json!("rules");
        assert_ne!(a, seed("openai_chat", "anthropic", &options, Some(&system)));
        let one = br#"[{"a":1},{"b":2},{"c":3}]"#;
        let two = br#"[{"a":1},{"b":2},{"c":4},{"d":5}]"#;
        let k1 = keys(a, one, &[1, 9, 17]);
        let k2 = keys(a, two, &[1, 9, 17, 25]);
        assert_eq!(k1[..3], k2[..3], "the same bytes before each cut");
        assert_ne!(keys(a + 1, one, &[1])[0], k1[0]);
    }
}
