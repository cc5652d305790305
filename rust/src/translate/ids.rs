//! Call ids rewritten to the target's rules, the same way every time: an id the target takes
//! is kept, so a session translated turn after turn sends the same ids and prompt caches keep
//! hitting; one it refuses becomes its allowed characters plus a hash of the original.

use xxhash_rust::xxh3::xxh3_64;

/// What a target allows in a call id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdRule {
    /// Longest id allowed, in bytes.
    pub max: usize,
}

impl IdRule {
    /// Anthropic and Bedrock: `^[a-zA-Z0-9_-]+$`, 1 to 64 characters; OpenAI Responses
    /// `call_id` and Gemini take the same without complaint.
    pub const STRICT_64: IdRule = IdRule { max: 64 };
    /// OpenAI Chat: at most 40 characters ("Expected a string with maximum length 40").
    pub const CHAT: IdRule = IdRule { max: 40 };

    fn allows(self, id: &str) -> bool {
        !id.is_empty() && id.len() <= self.max && id.bytes().all(allowed)
    }
}

fn allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Ids given so far, so each call gets an id no earlier call has and each result finds the id
/// its call got.
#[derive(Clone, Debug, Default)]
pub struct Ids {
    rule: Option<IdRule>,
    taken: std::collections::HashSet<String>,
    /// Source id -> the target id of its latest call.
    open: std::collections::HashMap<String, String>,
    /// `(source, target)` of every id rewritten.
    pub rewritten: Vec<(String, String)>,
}

impl Ids {
    pub fn new(rule: IdRule) -> Ids {
        Ids {
            rule: Some(rule),
            ..Ids::default()
        }
    }

    /// The target id of a call whose source id is `id`.
    pub fn call(&mut self, id: &str) -> String {
        let rule = self.rule.unwrap_or(IdRule::STRICT_64);
        let mut out = if rule.allows(id) {
            id.to_owned()
        } else {
            hashed(id, rule.max, 0)
        };
        let mut n = 1;
        while self.taken.contains(&out) {
            out = hashed(id, rule.max, n);
            n += 1;
        }
        self.taken.insert(out.clone());
        if out != id {
            self.rewritten.push((id.to_owned(), out.clone()));
        }
        self.open.insert(id.to_owned(), out.clone());
        out
    }

    /// Approximate heap bytes.
    pub fn size(&self) -> usize {
        self.taken.iter().map(|s| s.len() + 32).sum::<usize>()
            + self
                .open
                .iter()
                .map(|(k, v)| k.len() + v.len() + 48)
                .sum::<usize>()
            + self
                .rewritten
                .iter()
                .map(|(a, b)| a.len() + b.len() + 48)
                .sum::<usize>()
    }

    /// The target id of a result answering source id `id`: its call's.
    pub fn result(&mut self, id: &str) -> String {
        if let Some(out) = self.open.get(id) {
            return out.clone();
        }
        // A result without its call (the source's validator let it pass): still a valid id.
        let rule = self.rule.unwrap_or(IdRule::STRICT_64);
        if rule.allows(id) {
            id.to_owned()
        } else {
            hashed(id, rule.max, 0)
        }
    }
}

/// `id` in allowed characters, cut to leave room, then `_` and 12 hex digits of its hash
/// (salted by `n` to step past an id taken already).
fn hashed(id: &str, max: usize, n: u64) -> String {
    let hash = xxh3_64(id.as_bytes()) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let tail = format!("_{:012x}", hash & 0xFFFF_FFFF_FFFF);
    let head: String = id
        .chars()
        .map(|c| {
            if c.is_ascii() && allowed(c as u8) {
                c
            } else {
                '_'
            }
        })
        .take(max.saturating_sub(tail.len()))
        .collect();
    let head = if head.is_empty() {
        "call".to_owned()
    } else {
        head
    };
    format!("{head}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_valid_id_is_kept_and_a_repeated_one_made_unique() {
        let mut ids = Ids::new(IdRule::STRICT_64);
        assert_eq!(ids.call("toolu_01"), "toolu_01");
        let again = ids.call("toolu_01");
        assert_ne!(again, "toolu_01");
        assert_eq!(ids.result("toolu_01"), again);
        assert_eq!(ids.rewritten, [("toolu_01".to_owned(), again)]);
    }

    proptest! {
        #[test]
        fn every_id_follows_the_rule_and_is_stable(raw in proptest::collection::vec(".{0,90}", 1..12)) {
            for rule in [IdRule::STRICT_64, IdRule::CHAT] {
                let run = || {
                    let mut ids = Ids::new(rule);
                    raw.iter().map(|id| ids.call(id)).collect::<Vec<_>>()
                };
                let first = run();
                prop_assert_eq!(&first, &run());
                let unique: std::collections::HashSet<_> = first.iter().collect();
                prop_assert_eq!(unique.len(), first.len());
                for id in &first {
                    prop_assert!(rule.allows(id), "{id:?}");
                }
            }
        }
    }
}
