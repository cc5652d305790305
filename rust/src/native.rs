//! A request in a provider's native format, read in the core once per assembly: its items
//! parsed from JSON, its pairing checked by that provider's own rules, and its canonical view
//! built with real costs, ready to be counted and planned as often as the assembly needs.
//! Nothing of it goes through Python, and nothing stands in for a cost: a PDF page, an image or
//! an opaque item is priced where it is read.

use crate::error::CoreError;
use crate::native_body::Piece;
use crate::pairing::PairingIssue;
use crate::plan::Layout;
use crate::providers::{
    anthropic::Anthropic, bedrock_converse::BedrockConverse, gemini::Gemini,
    openai_chat::OpenAIChat, openai_responses::OpenAIResponses, Dump, ItemFacts, Provider,
};
use crate::view::{Message, Role, Text};
use std::any::Any;
use std::sync::Arc;

/// A native request as the planner sees it.
#[derive(Clone, Debug, Default)]
pub struct Native {
    /// Every pairing issue by the provider's rules, in item order.
    pub issues: Vec<PairingIssue>,
    /// The canonical messages: the system texts first, then the items the provider reads.
    /// Built whatever the issues, so a broken request can still be counted; the caller
    /// refuses to plan it.
    pub messages: Vec<Message>,
    /// Groups of the canonical messages: 0 for the system, else one more than the first
    /// native item the message stands for.
    pub layout: Layout,
    /// For each canonical message, the native items `[start, end)` it stands for; `None` for
    /// a system text.
    pub spans: Vec<Option<(usize, usize)>>,
    /// Canonical messages the provider's rules keep whatever the budget.
    pub pinned: Vec<usize>,
    /// Native items read.
    pub items: usize,
    /// What rendering needs to know of each native item.
    pub facts: Vec<ItemFacts>,
    /// Tokens the provider adds to the prompt when tools are given.
    pub tool_system_tokens: u32,
    /// The system texts the items were read behind.
    pub system: Vec<Vec<String>>,
    /// The items as the provider parsed them, shared: a request sent from a plan of this
    /// one (`sent`) is made of them without reading the caller's items again.
    pub parsed: Parsed,
}

/// A provider's parsed items (`Vec<Arc<P::Item>>`), whichever provider read them.
#[derive(Clone, Default)]
pub struct Parsed(Option<Arc<dyn Any + Send + Sync>>);

impl Parsed {
    /// The items, when `P` read them.
    pub fn of<P: Provider>(&self) -> Option<&Vec<Arc<P::Item>>> {
        self.0.as_ref()?.downcast_ref::<Vec<Arc<P::Item>>>()
    }
}

impl std::fmt::Debug for Parsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Parsed(..)"
        } else {
            "Parsed(none)"
        })
    }
}

impl Native {
    /// The native items the canonical messages `canonical` stand for, in order, each once: a
    /// system text stands for none.
    ///
    /// Errors: `InvalidMessage` for an index past the canonical messages.
    pub fn kept(
        &self,
        canonical: impl IntoIterator<Item = usize>,
    ) -> Result<Vec<usize>, CoreError> {
        let mut out = Vec::with_capacity(self.items);
        // Indices below `following` are in `out` already, or were passed over.
        let mut following = 0;
        for k in canonical {
            let span = self.spans.get(k).ok_or_else(|| CoreError::InvalidMessage {
                index: None,
                reason: format!("canonical message {k} of {}", self.spans.len()),
            })?;
            if let Some((start, end)) = *span {
                let start = start.max(following);
                if start < end {
                    out.extend(start..end);
                    following = end;
                }
            }
        }
        Ok(out)
    }

    /// Canonical index spans `[start, end)` (units a plan dropped) as the spans of the native
    /// items they stand for; a span of system texts alone stands for none and is left out.
    pub fn native_spans(&self, spans: &[(usize, usize)]) -> Vec<(usize, usize)> {
        let of = &self.spans;
        spans
            .iter()
            .filter_map(|&(start, end)| {
                let natives = of.get(start..end.min(of.len()))?.iter().flatten();
                let lo = natives.clone().map(|s| s.0).min()?;
                let hi = natives.map(|s| s.1).max()?;
                Some((lo, hi))
            })
            .collect()
    }
}

/// Something to do with whichever provider a key names (`with_provider`).
pub trait ForProvider {
    type Out;
    fn run<P: Provider>(self, p: P) -> Self::Out;
}

/// Runs `f` with the provider `provider` names.
///
/// Errors: `Config` naming `provider` when no provider of that key exists.
pub fn with_provider<F: ForProvider>(provider: &str, f: F) -> Result<F::Out, CoreError> {
    Ok(match provider {
        OpenAIChat::KEY => f.run(OpenAIChat),
        Anthropic::KEY => f.run(Anthropic),
        OpenAIResponses::KEY => f.run(OpenAIResponses),
        Gemini::KEY => f.run(Gemini),
        BedrockConverse::KEY => f.run(BedrockConverse),
        other => {
            return Err(CoreError::Config {
                key: "provider".to_owned(),
                reason: format!(
                    "no provider '{other}' (have: {}, {}, {}, {}, {})",
                    OpenAIChat::KEY,
                    Anthropic::KEY,
                    OpenAIResponses::KEY,
                    Gemini::KEY,
                    BedrockConverse::KEY
                ),
            })
        }
    })
}

/// Reads a request of `provider`'s native items, given as JSON arrays whose elements follow
/// each other, behind system messages of `system` texts (one message per inner list, an
/// empty one too: the provider's adapter decides which it sends).
///
/// Errors: `Config` naming `provider` when no provider of that key exists; `InvalidMessage`
/// naming the item when one is malformed.
pub fn read(provider: &str, parts: &[&[u8]], system: &[Vec<String>]) -> Result<Native, CoreError> {
    read_elements(provider, &crate::json_array::split_all(parts)?, system)
}

/// `read` of items given each as its own JSON, in order: the elements of an array the caller
/// has split already (the gateway path splits the body once).
///
/// Errors: as `read`.
pub fn read_elements(
    provider: &str,
    elements: &[&[u8]],
    system: &[Vec<String>],
) -> Result<Native, CoreError> {
    read_elements_keyed(provider, elements, None, system)
}

/// `read_elements` of elements whose item cache keys the caller may have computed already
/// (`item_seed`): `keys`, one per element; without them (or not one each) they are computed.
///
/// Errors: as `read`.
pub fn read_elements_keyed(
    provider: &str,
    elements: &[&[u8]],
    keys: Option<&[u128]>,
    system: &[Vec<String>],
) -> Result<Native, CoreError> {
    struct Read<'a>(&'a [&'a [u8]], Option<&'a [u128]>, &'a [Vec<String>]);
    impl ForProvider for Read<'_> {
        type Out = Result<Native, CoreError>;
        fn run<P: Provider>(self, p: P) -> Self::Out {
            let items = match self.1 {
                Some(keys) if keys.len() == self.0.len() => {
                    p.parse_elements_keyed(self.0, Some(keys))?
                }
                _ => p.parse_elements(self.0)?,
            };
            Ok(view(p, items, self.2))
        }
    }
    with_provider(provider, Read(elements, keys, system))?
}

/// Reads a request whose items were keyed from the caller's objects (`keys`, seeded with
/// `item_seed`): each item met before comes from the provider's cache, the others are
/// serialized by `dump` and parsed; `check` is given the bytes of JSON the items are before
/// any is parsed.
///
/// Errors: as `read`, and what `dump` or `check` return.
pub fn read_keyed(
    provider: &str,
    keys: &[u128],
    dump: &mut Dump<'_>,
    check: &dyn Fn(usize) -> Result<(), CoreError>,
    system: &[Vec<String>],
) -> Result<Native, CoreError> {
    struct Keyed<'a, 'd> {
        keys: &'a [u128],
        dump: &'a mut Dump<'d>,
        check: &'a dyn Fn(usize) -> Result<(), CoreError>,
        system: &'a [Vec<String>],
    }
    impl ForProvider for Keyed<'_, '_> {
        type Out = Result<Native, CoreError>;
        fn run<P: Provider>(self, p: P) -> Self::Out {
            let items = p.parse_keyed(self.keys, self.dump, self.check)?;
            Ok(view(p, items, self.system))
        }
    }
    with_provider(
        provider,
        Keyed {
            keys,
            dump,
            check,
            system,
        },
    )?
}

/// The seed of `provider`'s item keys, None for a provider that keeps no items.
///
/// Errors: `Config` naming `provider` when no provider of that key exists.
pub fn item_seed(provider: &str) -> Result<Option<u64>, CoreError> {
    struct Seed;
    impl ForProvider for Seed {
        type Out = Option<u64>;
        fn run<P: Provider>(self, p: P) -> Self::Out {
            p.item_cache().map(|cache| cache.seed())
        }
    }
    with_provider(provider, Seed)
}

/// The request the core writes from a plan of `native`, read back as the provider reads it:
/// the `pieces` in order (a kept item as `native`'s own parsed item, a new one parsed from its
/// JSON) behind the system texts `system`. Only the new items are parsed.
///
/// Errors: `Config` for an unknown provider, or one other than the reader of `native`;
/// `InvalidMessage` for a kept index past `native`'s items or a new item that does not parse.
pub fn sent(
    provider: &str,
    native: &Native,
    pieces: &[Piece],
    system: &[Vec<String>],
) -> Result<Native, CoreError> {
    struct Sent<'a> {
        native: &'a Native,
        pieces: &'a [Piece],
        system: &'a [Vec<String>],
    }
    impl ForProvider for Sent<'_> {
        type Out = Result<Native, CoreError>;
        fn run<P: Provider>(self, p: P) -> Self::Out {
            let parsed = self
                .native
                .parsed
                .of::<P>()
                .ok_or_else(|| CoreError::Config {
                    key: "provider".to_owned(),
                    reason: format!("the request was not read as {}", P::KEY),
                })?;
            let mut items = Vec::with_capacity(self.pieces.len());
            for piece in self.pieces {
                let item = match piece {
                    Piece::Keep(i) => {
                        parsed
                            .get(*i)
                            .cloned()
                            .ok_or_else(|| CoreError::InvalidMessage {
                                index: None,
                                reason: format!("item {i} of {}", parsed.len()),
                            })?
                    }
                    Piece::New { json, .. } => Arc::new(p.parse(items.len(), json)?),
                };
                items.push(item);
            }
            Ok(view(p, items, self.system))
        }
    }
    with_provider(
        provider,
        Sent {
            native,
            pieces,
            system,
        },
    )?
}

/// The native request of `items` behind `system`.
fn view<P: Provider>(p: P, items: Vec<Arc<P::Item>>, system: &[Vec<String>]) -> Native {
    let (issues, canonical) = p.issues_and_canonical(&items);
    let mut out = Native {
        items: items.len(),
        facts: items.iter().map(|item| p.facts(item)).collect(),
        tool_system_tokens: P::TOOL_SYSTEM_TOKENS,
        system: system.to_vec(),
        ..Native::default()
    };
    // Where the provider needs a user turn first, the system holds on to the first turn, so
    // no plan can leave a request opening with the model's turn.
    let glue = P::SYSTEM_HOLDS_FIRST_TURN && !canonical.messages.is_empty();
    for texts in system {
        let mut msg = crate::providers::empty(Role::System);
        msg.texts = texts.iter().map(|t| Text::from(t.as_str())).collect();
        msg.bytes = texts.iter().map(String::len).sum();
        out.messages.push(msg);
        out.layout.groups.push(0);
        out.layout.binds_next.push(glue);
        out.spans.push(None);
    }
    let pinned_items = p.pinned(&items);
    let starts = &canonical.layout.groups;
    for (k, &start) in starts.iter().enumerate() {
        // A message stands for the items up to the next message's first item.
        let end = starts[k + 1..]
            .iter()
            .find(|&&s| s > start)
            .copied()
            .unwrap_or(items.len());
        if pinned_items.contains(&start) {
            out.pinned.push(out.messages.len() + k);
        }
        out.spans.push(Some((start, end.max(start + 1))));
        out.layout.groups.push(start + 1);
    }
    out.layout.binds_next.extend(&canonical.layout.binds_next);
    out.layout.results_named = P::RESULTS_NAMED;
    out.messages.extend(canonical.messages);
    out.issues = issues;
    out.parsed = Parsed(Some(Arc::new(items)));
    out
}

/// The pairing issues of a request given as JSON arrays of `provider`'s native items.
///
/// Errors: `Config` naming `provider` when no provider of that key exists; `InvalidMessage`
/// when an item is malformed.
pub fn validate_json(provider: &str, parts: &[&[u8]]) -> Result<Vec<PairingIssue>, CoreError> {
    struct Validate<'a>(&'a [&'a [u8]]);
    impl ForProvider for Validate<'_> {
        type Out = Result<Vec<PairingIssue>, CoreError>;
        fn run<P: Provider>(self, p: P) -> Self::Out {
            Ok(p.validate(&p.parse_all(self.0)?))
        }
    }
    with_provider(provider, Validate(parts))?
}

/// `validate_json` of one array's items, split already (`json_array::split`), for a caller
/// that meets the same items again and again: a session translated on every turn, its
/// source read and its output read back. Each item met before is taken from its provider's
/// cache; OpenAI Chat's provider keeps none (an assembly caches Chat messages by count key,
/// and reads them otherwise), so its items are kept here, for this use only.
pub fn validate_elements(
    provider: &str,
    elements: &[&[u8]],
) -> Result<Vec<PairingIssue>, CoreError> {
    if provider != OpenAIChat::KEY {
        struct Validate<'a>(&'a [&'a [u8]]);
        impl ForProvider for Validate<'_> {
            type Out = Result<Vec<PairingIssue>, CoreError>;
            fn run<P: Provider>(self, p: P) -> Self::Out {
                Ok(p.validate(&p.parse_elements(self.0)?))
            }
        }
        return with_provider(provider, Validate(elements))?;
    }
    let cache = chat_items();
    let mut items = Vec::with_capacity(elements.len());
    for (i, &raw) in elements.iter().enumerate() {
        let key = cache.key(raw);
        let item = match cache.get(key) {
            Some(hit) => hit,
            None => {
                let item = Arc::new(OpenAIChat.parse(i, raw)?);
                cache.insert(key, Arc::clone(&item), raw.len());
                item
            }
        };
        items.push(item);
    }
    OpenAIChat.check_items(&items)?;
    Ok(OpenAIChat.validate(&items))
}

/// The OpenAI Chat messages `validate_elements` has read, by the hash of their JSON.
fn chat_items() -> &'static crate::providers::item_cache::ItemCache<Message> {
    static CACHE: std::sync::OnceLock<crate::providers::item_cache::ItemCache<Message>> =
        std::sync::OnceLock::new();
    // Any seed apart from the other providers': this cache is the only one of Chat items.
    CACHE.get_or_init(|| crate::providers::item_cache::ItemCache::new(0x6368_6174_5f76_616c))
}

/// Empties the OpenAI Chat messages `validate_elements` keeps (what a cold benchmark needs).
pub fn clear_validated() {
    chat_items().clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_json(provider: &str, json: &str, system: &[Vec<String>]) -> Native {
        read(provider, &[json.as_bytes()], system).expect("reads")
    }

    #[test]
    fn system_texts_come_first_in_group_zero() {
        let native = read_json(
            "anthropic",
            r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]"#,
            &[vec!["rules".to_owned(), "more".to_owned()]],
        );
        assert_eq!(native.messages[0].role, Role::System);
        assert_eq!(
            crate::view::strs(&native.messages[0].texts),
            ["rules", "more"]
        );
        assert_eq!(native.layout.groups, [0, 1, 2]);
        assert_eq!(native.spans, [None, Some((0, 1)), Some((1, 2))]);
        assert_eq!(native.items, 2);
    }

    #[test]
    fn a_request_sent_from_a_plan_reads_as_its_json_reads() {
        let system = [vec!["rules".to_owned()]];
        let native = read_json(
            "anthropic",
            r#"[{"role":"user","content":"a"},{"role":"assistant","content":"b"},
                {"role":"user","content":[{"type":"text","text":"c"}]},
                {"role":"assistant","content":"d"}]"#,
            &system,
        );
        let merged =
            r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"c"}]}"#;
        let new = Piece::New {
            origins: vec![0, 2],
            json: merged.as_bytes().to_vec(),
        };
        let out = sent("anthropic", &native, &[new, Piece::Keep(3)], &system).expect("sends");
        let direct = read_json(
            "anthropic",
            &format!(r#"[{merged},{{"role":"assistant","content":"d"}}]"#),
            &system,
        );
        assert_eq!(
            format!("{:?}", out.messages),
            format!("{:?}", direct.messages)
        );
        assert_eq!(
            (out.spans, out.items, out.issues),
            (direct.spans, direct.items, direct.issues)
        );
        // The kept items are the reading's own, not read again.
        let kept = [Piece::Keep(1), Piece::Keep(3)];
        let out = sent("anthropic", &native, &kept, &system).expect("sends");
        assert_eq!(out.items, 2);
        assert!(matches!(
            sent("gemini", &native, &[Piece::Keep(0)], &system),
            Err(CoreError::Config { .. })
        ));
        assert!(matches!(
            sent("anthropic", &native, &[Piece::Keep(9)], &system),
            Err(CoreError::InvalidMessage { .. })
        ));
    }

    #[test]
    fn a_turn_of_several_messages_spans_them_all() {
        let native = read_json(
            "anthropic",
            r#"[{"role":"user","content":"a"},{"role":"user","content":"b"},
                {"role":"assistant","content":"c"}]"#,
            &[],
        );
        assert_eq!(native.spans, [Some((0, 2)), Some((2, 3))]);
    }

    #[test]
    fn a_broken_request_has_issues_and_still_a_view_to_count() {
        let native = read_json(
            "anthropic",
            r#"[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"r"}]}]"#,
            &[],
        );
        assert!(!native.issues.is_empty());
        assert_eq!(native.messages.len(), 1);
    }

    #[test]
    fn the_latest_responses_compaction_is_pinned() {
        let native = read_json(
            "openai_responses",
            r#"[{"type":"compaction","id":"c1","encrypted_content":"aaaa"},
                {"role":"user","content":"go"},
                {"type":"compaction","id":"c2","encrypted_content":"bbbb"},
                {"role":"user","content":"on"}]"#,
            &[],
        );
        assert_eq!(native.pinned, [2]);
    }

    #[test]
    fn every_bound_holds_and_a_warm_read_counts_the_same() {
        use crate::cache::CountCache;
        use crate::count::{Backend, Encoding};
        use crate::request::{load_canonical, Scheme};
        let json = r#"[{"role":"user","content":[{"type":"text","text":"find the bug"},
            {"type":"text","text":"in parse.rs"}]},
            {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"grep",
              "input":{"pattern":"fn parse","path":"src/"}}]},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1",
              "content":"src/parse.rs:10: fn parse(x: &str)"}]}]"#;
        let scheme = Scheme::openai(Encoding::O200kBase, Backend::BpeOpenai);
        let cache = CountCache::new(1024, 1 << 20);
        let count = |cache: &CountCache| {
            let native = read_json("anthropic", json, &[vec!["be brief".to_owned()]]);
            let req = load_canonical(native.messages, None, scheme, cache).expect("loads");
            for i in 0..req.len() {
                assert!(req.bound(i) >= req.tokens(i), "message {i}");
            }
            req.message_tokens()
        };
        let cold = count(&cache);
        assert!(!cache.is_empty());
        assert_eq!(count(&cache), cold);
    }

    #[test]
    fn items_read_again_come_from_the_cache_as_they_were_read() {
        for (provider, json, edited) in [
            (
                "gemini",
                r#"[{"role":"user","parts":[{"text":"cache me once"}]}]"#,
                r#"[{"role":"user","parts":[{"text":"cache me twice"}]}]"#,
            ),
            (
                "openai_responses",
                r#"[{"role":"user","content":"cache me once"}]"#,
                r#"[{"role":"user","content":"cache me twice"}]"#,
            ),
        ] {
            let first = read_json(provider, json, &[]);
            let again = read_json(provider, json, &[]);
            assert_eq!(first.messages, again.messages, "{provider}");
            let other = read_json(provider, edited, &[]);
            assert_eq!(
                crate::view::strs(&other.messages[0].texts),
                ["cache me twice"],
                "{provider}"
            );
        }
    }

    /// Keys as a walk of the caller's objects would make them: here, the hash of each item's
    /// JSON under a seed no JSON key uses.
    fn keyed(provider: &str, items: &[&str], system: &[Vec<String>]) -> (Native, Vec<usize>) {
        let seed = item_seed(provider)
            .expect("a provider")
            .expect("keeps items")
            ^ 0xdead;
        let keys: Vec<u128> = items
            .iter()
            .map(|raw| xxhash_rust::xxh3::xxh3_128_with_seed(raw.as_bytes(), seed))
            .collect();
        let mut asked = Vec::new();
        let mut dump = |missed: &[usize]| {
            asked.extend_from_slice(missed);
            Ok(missed
                .iter()
                .map(|&i| (keys[i], items[i].as_bytes().to_vec()))
                .collect())
        };
        let native = read_keyed(provider, &keys, &mut dump, &|_| Ok(()), system).expect("reads");
        (native, asked)
    }

    #[test]
    fn a_keyed_reading_is_the_reading_and_serializes_only_what_it_has_not_met() {
        let items = [
            r#"{"role":"user","content":[{"type":"text","text":"keyed 1","cache_control":{"type":"ephemeral"}}]}"#,
            r#"{"role":"assistant","content":[{"type":"text","text":" \n"},{"type":"text","text":"ok"}]}"#,
        ];
        let json = format!("[{}]", items.join(","));
        let system = [vec!["rules".to_owned()]];
        let read = read_json("anthropic", &json, &system);
        let (first, asked) = keyed("anthropic", &items, &system);
        assert_eq!(asked, [0, 1]);
        let (again, asked) = keyed("anthropic", &items, &system);
        assert!(asked.is_empty(), "every item met before");
        for native in [first, again] {
            assert_eq!(native.messages, read.messages);
            assert_eq!(native.spans, read.spans);
            assert_eq!(native.facts, read.facts);
        }
        assert_eq!(
            read.facts,
            [
                ItemFacts {
                    role: Some("user"),
                    blank_text: false,
                    cache_markers: 1,
                    opens_with_thinking: false,
                },
                ItemFacts {
                    role: Some("assistant"),
                    blank_text: true,
                    cache_markers: 0,
                    opens_with_thinking: false,
                },
            ]
        );
    }

    #[test]
    fn a_keyed_reading_refuses_a_list_that_changed_and_checks_the_size_first() {
        let keys = [1u128, 2];
        let mut short = |_: &[usize]| Ok(vec![(1u128, b"{}".to_vec())]);
        let err = read_keyed("gemini", &keys, &mut short, &|_| Ok(()), &[]).unwrap_err();
        assert!(
            err.to_string().contains("changed while it was read"),
            "{err}"
        );
        let mut dump = |missed: &[usize]| {
            Ok(missed
                .iter()
                .map(|&i| {
                    (
                        keys[i],
                        br#"{"role":"user","parts":[{"text":"x"}]}"#.to_vec(),
                    )
                })
                .collect())
        };
        let too_big = |bytes: usize| {
            Err(CoreError::Config {
                key: "max_request_bytes".into(),
                reason: format!("{bytes}"),
            })
        };
        let err = read_keyed("gemini", &keys, &mut dump, &too_big, &[]).unwrap_err();
        assert!(matches!(err, CoreError::Config { .. }), "{err}");
    }

    #[test]
    fn an_unknown_provider_is_a_config_error() {
        let err = read("nope", &[b"[]"], &[]).unwrap_err();
        assert!(matches!(err, CoreError::Config { ref key, .. } if key == "provider"));
    }
}
