//! The checks behind the fuzz targets, one function per target: each takes the fuzzer's bytes
//! and panics on a finding (a panic inside the core, or a disagreement with the oracle). They
//! live here, not in the targets, so that `cargo test` in this crate replays the committed
//! seed corpora through the same checks on the stable toolchain.

use ringbound::cache::CountCache;
use ringbound::count::{Backend, Encoding};
use ringbound::json::message as openai_chat;
use ringbound::pairing::stray::{classify, Stray};
use ringbound::providers::anthropic::Anthropic;
use ringbound::providers::openai_chat::OpenAIChat;
use ringbound::providers::openai_responses::OpenAIResponses;
use ringbound::providers::Provider;
use ringbound::request::{load_canonical, Scheme};
use ringbound::{json_array, pairing};
use serde_json::value::RawValue;
use serde_json::Value;

/// The splitter against serde_json: an array serde_json reads is split into exactly its
/// elements' text, and a split whose every element serde_json reads is an array serde_json
/// reads with those elements.
pub fn json_array(data: &[u8]) {
    let split = json_array::split(data);
    if let Ok(elements) = serde_json::from_slice::<Vec<&RawValue>>(data) {
        let parts =
            split.unwrap_or_else(|e| panic!("serde_json reads the array, split fails: {e}"));
        let expected: Vec<&[u8]> = elements.iter().map(|e| e.get().as_bytes()).collect();
        assert_eq!(
            parts, expected,
            "split disagrees with serde_json on the elements"
        );
        return;
    }
    let Ok(parts) = split else { return };
    if parts
        .iter()
        .all(|p| serde_json::from_slice::<Value>(p).is_ok())
    {
        // Every element reads alone, so the array must read whole.
        assert!(
            serde_json::from_slice::<Vec<&RawValue>>(data).is_ok(),
            "split accepts an array serde_json rejects"
        );
    }
}

/// The chat parser, bytes in: the fast path for plain messages agrees with the full parse of
/// the serde_json value, and validation reports issues at positions that exist.
pub fn openai_chat(data: &[u8]) {
    let Ok(raws) = json_array::split(data) else {
        return;
    };
    let mut messages = Vec::with_capacity(raws.len());
    for (i, raw) in raws.iter().enumerate() {
        let parsed = openai_chat::parse_raw(i, raw);
        if let Ok(value) = serde_json::from_slice::<Value>(raw) {
            let full = openai_chat::parse_message(i, &value, raw.len());
            match (&parsed, &full) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "fast and full parse differ"),
                (Err(_), Err(_)) => {}
                _ => panic!("fast and full parse disagree: {parsed:?} vs {full:?}"),
            }
        }
        match parsed {
            Ok(m) => messages.push(std::sync::Arc::new(m)),
            Err(_) => return,
        }
    }
    check_issues(&OpenAIChat.validate(&messages), messages.len());
    let canonical = OpenAIChat.canonical(&messages);
    assert_eq!(canonical.messages.len(), messages.len());
}

/// The Anthropic parser and validator, bytes in: no panic, issues at positions that exist,
/// and a canonical view whose layout covers every message it makes.
pub fn anthropic(data: &[u8]) {
    let Ok(items) = Anthropic.parse_all(&[data]) else {
        return;
    };
    check_issues(&Anthropic.validate(&items), items.len());
    let canonical = Anthropic.canonical(&items);
    let n = canonical.messages.len();
    assert!(canonical.layout.groups.is_empty() || canonical.layout.groups.len() == n);
    assert!(canonical.layout.binds_next.is_empty() || canonical.layout.binds_next.len() == n);
    assert!(canonical.first_counted <= items.len());
}

/// The OpenAI Responses parser and validator, bytes in: no panic, issues at items that exist,
/// and a canonical view whose layout covers every message it makes, in item order.
pub fn openai_responses(data: &[u8]) {
    let Ok(items) = OpenAIResponses.parse_all(&[data]) else {
        return;
    };
    check_issues(&OpenAIResponses.validate(&items), items.len());
    let canonical = OpenAIResponses.canonical(&items);
    let n = canonical.messages.len();
    assert_eq!(canonical.layout.groups.len(), n);
    assert_eq!(canonical.layout.binds_next.len(), n);
    assert!(canonical.layout.groups.windows(2).all(|w| w[0] <= w[1]));
    assert!(canonical.layout.groups.iter().all(|&g| g < items.len()));
}

/// The providers the `native` target reads, chosen by the input's first byte.
pub const NATIVE_PROVIDERS: [&str; 5] = [
    "anthropic",
    "openai_responses",
    "gemini",
    "bedrock_converse",
    "openai_chat",
];

/// A native request read as the planner reads it (`native::read`, then the count cache),
/// bytes in: no panic; one span, group and bind per canonical message, spans in item order
/// within the items read, pins that exist; every message's token bound at least its count;
/// and the same reading again, from the item cache, identical.
pub fn native(data: &[u8]) {
    let Some((&pick, json)) = data.split_first() else {
        return;
    };
    let provider = NATIVE_PROVIDERS[usize::from(pick) % NATIVE_PROVIDERS.len()];
    let system = [vec!["rules".to_owned()]];
    let Ok(read) = ringbound::native::read(provider, &[json], &system) else {
        return;
    };
    check_issues(&read.issues, read.items);
    let n = read.messages.len();
    assert_eq!(read.spans.len(), n);
    assert_eq!(read.layout.groups.len(), n);
    assert_eq!(read.layout.binds_next.len(), n);
    assert!(read.layout.groups.windows(2).all(|w| w[0] <= w[1]));
    let spans: Vec<(usize, usize)> = read.spans.iter().flatten().copied().collect();
    assert!(spans.iter().all(|&(a, b)| a < b && b <= read.items));
    assert!(spans.windows(2).all(|w| w[0].0 <= w[1].0));
    assert!(read.pinned.iter().all(|&k| k < n));
    let again = ringbound::native::read(provider, &[json], &system).expect("read once already");
    assert_eq!(
        again.messages, read.messages,
        "the cached items read differently"
    );
    keyed_reads_alike(provider, json, &system, &read);
    body_splits_alike(json);
    let scheme = Scheme::openai(Encoding::O200kBase, Backend::BpeOpenai);
    let cache = CountCache::new(64, 1 << 20);
    let messages = read.messages.clone();
    let req = load_canonical(messages, None, scheme, &cache).expect("no tools to read");
    for i in 0..req.len() {
        let bound = req.bound(i);
        assert!(
            bound >= req.tokens(i),
            "message {i}: bound {bound} under its count"
        );
    }
    written_as_planned(provider, json, &read, &req, &cache);
}

/// A plan of the reading that cuts results small (and synthesizes missing ones), written by
/// the core where it can be: the history written reads back paired, and, with nothing merged,
/// at the tokens the plan counted.
fn written_as_planned(
    provider: &str,
    json: &[u8],
    read: &ringbound::native::Native,
    req: &ringbound::request::Request<'_>,
    cache: &CountCache,
) {
    use ringbound::native_body::{kept_as_given, write, System};
    use ringbound::plan::{plan, PlanConfig, Stage};
    let Ok(items) = json_array::split(json) else {
        return;
    };
    let priming = u64::from(ringbound::count::chat::REPLY_PRIMING);
    let total = req.message_tokens() + priming;
    let config = PlanConfig {
        budget: total,
        recent_tool_rings: 1,
        recent_user_turns: 1,
        pin_first_user_message: true,
        pin_side_effect_ledger: true,
        pin_security_system_prompt: true,
        short_error_result_tokens: 50,
        max_held_error_rings: 2,
        side_effect_tools: std::collections::HashSet::new(),
        ledger_fields: std::collections::HashMap::new(),
        stages: Stage::DEFAULT_ORDER.to_vec(),
        drop_tools_schema: false,
        synthesize_missing_results: true,
        max_tool_result_tokens: 80,
        min_result_tokens: 40,
        min_recent_tool_rings: 1,
        min_recent_user_turns: 1,
        summary_reserve: None,
        recorded_ledger: Vec::new(),
        replay: None,
    };
    let mut pinned = read.pinned.clone();
    pinned.sort_unstable();
    // The tightest of a few budgets that can be met.
    let Some(planned) = [2, 3, 4, 5].into_iter().find_map(|fifths| {
        let config = PlanConfig {
            budget: total * fifths / 5,
            ..config.clone()
        };
        plan(req, &config, &pinned, Some(&read.layout)).ok()
    }) else {
        return;
    };
    let Ok(Some(kept)) = kept_as_given(provider, read, &planned, 0, |k| req.get(k)) else {
        return;
    };
    let head = br#"{"history":[]}"#;
    let at = 11..13;
    let Ok(Some(out)) = write(provider, head, at, System::default(), &items, &kept) else {
        return;
    };
    let history = &out.body[out.history.clone()];
    let again = ringbound::native::read(provider, &[history], &read.system)
        .unwrap_or_else(|e| panic!("the history the core wrote does not read: {e}"));
    assert!(
        again.issues.is_empty(),
        "the history the core wrote does not pair"
    );
    if kept.merges.is_empty() {
        let scheme = Scheme::openai(Encoding::O200kBase, Backend::BpeOpenai);
        let counted = load_canonical(again.messages, None, scheme, cache).expect("read once");
        assert_eq!(
            counted.message_tokens() + priming,
            planned.tokens_after,
            "the body written is not the request planned"
        );
    }
}

/// The keyed reading (items taken from the cache by a key of the caller's objects, the others
/// serialized on demand) reads what reading the JSON reads, cold and then warm.
fn keyed_reads_alike(
    provider: &str,
    json: &[u8],
    system: &[Vec<String>],
    read: &ringbound::native::Native,
) {
    let Ok(items) = json_array::split(json) else {
        return;
    };
    // Keys that tell different items apart, as the walk's do (here: a hash and the length).
    let keys: Vec<u128> = items
        .iter()
        .map(|raw| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (provider, raw).hash(&mut h);
            (u128::from(h.finish()) << 64) | raw.len() as u128
        })
        .collect();
    for _ in 0..2 {
        let mut dump = |missed: &[usize]| {
            Ok(missed
                .iter()
                .map(|&i| (keys[i], items[i].to_vec()))
                .collect())
        };
        let keyed = ringbound::native::read_keyed(provider, &keys, &mut dump, &|_| Ok(()), system)
            .expect("the JSON reading read these items");
        assert_eq!(keyed.messages.len(), read.messages.len());
        assert_eq!(keyed.spans, read.spans);
        assert_eq!(keyed.issues, read.issues);
        assert_eq!(keyed.facts, read.facts);
        assert_eq!(keyed.pinned, read.pinned);
    }
}

/// The gateway's split of a body holds the history's elements exactly as the splitter makes
/// them, and the range of the array itself.
fn body_splits_alike(json: &[u8]) {
    let mut body = br#"{"model": "m", "input": "#.to_vec();
    body.extend_from_slice(json);
    body.extend_from_slice(br#", "store": false}"#);
    let limits = ringbound::request::Limits {
        max_messages: usize::MAX,
        max_request_bytes: usize::MAX,
    };
    let Some((elements, range)) = ringbound::body::Body::split_history(&body, "input", limits)
    else {
        return;
    };
    let expected = json_array::split(json).expect("the body's scan split this array");
    assert_eq!(elements, expected);
    assert_eq!(&body[range], json.trim_ascii());
}

fn check_issues(issues: &[pairing::PairingIssue], len: usize) {
    for issue in issues {
        assert!(
            issue.index <= len,
            "issue at {} of {len} items: {issue:?}",
            issue.index
        );
        assert!(!issue.message.is_empty());
    }
}

/// The stray classifier against its definition read literally, over a linear scan: the bytes
/// give the stray's position, the sorted call positions and the claim's answer.
pub fn stray(data: &[u8]) {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let at = usize::from(head >> 1);
    let answer = head & 1 == 1;
    let mut calls: Vec<usize> = rest.iter().map(|&c| usize::from(c >> 1)).collect();
    calls.sort_unstable();
    calls.dedup();
    let mut asked = None;
    let got = classify(at, &calls, |c| {
        asked = Some(c);
        answer
    });
    let latest_before = calls.iter().rev().find(|&&c| c < at).copied();
    let expected = match latest_before {
        None => match calls.iter().find(|&&c| c >= at) {
            Some(&call) => Stray::BeforeCall { call },
            None => Stray::Orphan,
        },
        Some(call) if answer => Stray::NotAdjacent { call },
        Some(call) => Stray::Duplicate { call },
    };
    assert_eq!(got, expected);
    assert_eq!(
        asked, latest_before,
        "the claim is asked about the latest earlier call only"
    );
}
