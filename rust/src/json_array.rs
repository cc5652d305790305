//! Splits a JSON array into the raw text of its elements without building any value: on the
//! warm path (every message already cached) this scan and one hash per element is all the
//! work a message costs. Elements are parsed properly, by serde_json, only on a cache miss.
//!
//! The scan reads 64 bytes at a time as bit masks (quotes, backslashes, brackets, commas),
//! finds the strings with a prefix XOR of their unescaped quotes and visits only the brackets
//! and commas outside them, as simdjson's first stage does: a history is mostly long strings
//! (code, logs, escaped JSON arguments), which a byte-by-byte scan stopping at every quote
//! crossed at a third of the speed. Input it cannot split cleanly goes to the byte-by-byte
//! scan, whose errors say what is wrong and where.

use memchr::memchr;

use crate::error::CoreError;

fn malformed(at: usize, what: &str) -> CoreError {
    CoreError::InvalidMessage {
        index: None,
        reason: format!("messages must be a JSON array of message objects ({what} at byte {at})"),
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_ws(&b[i]) {
        i += 1;
    }
    i
}

fn is_ws(c: &u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\r' | b'\t')
}

/// `b` without JSON's whitespace at either end (`trim_ascii` also takes a form feed, which
/// JSON does not allow).
fn trim_ws(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|c| !is_ws(c)).unwrap_or(b.len());
    trim_ws_end(&b[start..])
}

fn trim_ws_end(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|c| !is_ws(c)).map_or(0, |k| k + 1);
    &b[..end]
}

/// Index just past the closing quote of the string whose opening quote is at `i - 1`. Jumps
/// from quote to quote (escaped text like code and logs is full of backslashes, quotes are
/// rarer); a quote preceded by an odd run of backslashes is escaped.
fn skip_string(b: &[u8], mut i: usize) -> Result<usize, CoreError> {
    let start = i;
    while let Some(k) = memchr(b'"', &b[i..]) {
        let q = i + k;
        let backslashes = b[start..q]
            .iter()
            .rev()
            .take_while(|&&c| c == b'\\')
            .count();
        if backslashes % 2 == 0 {
            return Ok(q + 1);
        }
        i = q + 1;
    }
    Err(malformed(b.len(), "unterminated string"))
}

/// End of the element starting at `i`: just past its closing bracket, or at the `,`/`]` that
/// ends a scalar.
fn skip_element(b: &[u8], mut i: usize) -> Result<usize, CoreError> {
    let mut depth = 0usize;
    while i < b.len() {
        match b[i] {
            b'"' => i = skip_string(b, i + 1)?,
            b'{' | b'[' => {
                depth += 1;
                i += 1;
            }
            b'}' | b']' => {
                if depth == 0 {
                    return Ok(i);
                }
                depth -= 1;
                i += 1;
                if depth == 0 {
                    return Ok(i);
                }
            }
            b',' if depth == 0 => return Ok(i),
            _ => i += 1,
        }
        if depth == 0 && i < b.len() && matches!(b[i], b',' | b']') {
            return Ok(i);
        }
    }
    Err(malformed(b.len(), "unexpected end"))
}

/// The raw bytes of each element of the JSON array `b`, in order (UTF-8 is checked when an
/// element is parsed, not here). Structure errors between elements are reported here; an
/// element's own syntax is checked when it is parsed.
pub fn split(b: &[u8]) -> Result<Vec<&[u8]>, CoreError> {
    match split_blocks(b) {
        Some((parts, end)) if skip_ws(b, end) == b.len() => Ok(parts),
        _ => split_bytes(b),
    }
}

/// The elements of the JSON array that `b` starts with (no whitespace before it), and where
/// the array ends (just past its `]`); what follows is not read. None when the scan cannot
/// split it cleanly: the caller then reads `b` another way, which reports what is wrong. As
/// with `split`, only the structure between elements is proven; each element's own syntax
/// is checked when it is parsed.
pub fn split_prefix(b: &[u8]) -> Option<(Vec<&[u8]>, usize)> {
    if b.first() != Some(&b'[') {
        return None;
    }
    split_blocks(b)
}

/// The elements of JSON arrays whose elements follow each other, in order (`split` of each).
pub fn split_all<'a>(parts: &[&'a [u8]]) -> Result<Vec<&'a [u8]>, CoreError> {
    let mut out = Vec::new();
    for part in parts {
        out.extend(split(part)?);
    }
    Ok(out)
}

/// The elements of the one JSON array `parts` holds, at `spans` as a split of it found them:
/// the gateway path has split the body already, and splitting it again was a tenth of a next
/// turn. None when the spans do not fit the array (more than one part, out of bounds,
/// overlapping or out of order): the caller then splits it itself, so a wrong hint costs
/// time, never a wrong reading. Each element's syntax is checked when it is parsed, as
/// after `split`.
pub fn at_spans<'a>(parts: &[&'a [u8]], spans: &[(usize, usize)]) -> Option<Vec<&'a [u8]>> {
    let [array] = parts else { return None };
    let mut following = 0;
    let mut out = Vec::with_capacity(spans.len());
    for &(start, end) in spans {
        if start < following || end < start || end > array.len() {
            return None;
        }
        out.push(&array[start..end]);
        following = end;
    }
    Some(out)
}

/// Where the bytes that matter to the split are in one 64-byte block: bit i stands for byte i.
#[derive(Debug, Default, PartialEq, Eq)]
struct Masks {
    quote: u64,
    backslash: u64,
    /// `{` and `[`.
    open: u64,
    /// `}` and `]`.
    close: u64,
    comma: u64,
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn masks(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut m = Masks::default();
    for k in 0..4 {
        // SAFETY: SSE2 is part of every x86_64 target, and the load reads 16 of the block's
        // 64 bytes (unaligned loads are allowed).
        unsafe {
            let v = _mm_loadu_si128(block.as_ptr().add(16 * k).cast());
            let bits = |w| u64::from(_mm_movemask_epi8(w) as u16) << (16 * k);
            let eq = |c: u8| bits(_mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8)));
            // `{`/`[` and `}`/`]` differ only in bit 5: set it and compare once.
            let folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
            m.quote |= eq(b'"');
            m.backslash |= eq(b'\\');
            m.comma |= eq(b',');
            m.open |= bits(_mm_cmpeq_epi8(folded, _mm_set1_epi8(b'{' as i8)));
            m.close |= bits(_mm_cmpeq_epi8(folded, _mm_set1_epi8(b'}' as i8)));
        }
    }
    m
}

#[cfg(not(target_arch = "x86_64"))]
fn masks(block: &[u8; 64]) -> Masks {
    masks_by_byte(block)
}

#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn masks_by_byte(block: &[u8; 64]) -> Masks {
    let mut m = Masks::default();
    for (i, &c) in block.iter().enumerate() {
        let bit = 1u64 << i;
        match c {
            b'"' => m.quote |= bit,
            b'\\' => m.backslash |= bit,
            b'{' | b'[' => m.open |= bit,
            b'}' | b']' => m.close |= bit,
            b',' => m.comma |= bit,
            _ => {}
        }
    }
    m
}

/// Bits 0, 2, 4, ...
const EVEN: u64 = 0x5555_5555_5555_5555;

/// The bytes after a run of backslashes that the run escapes (those after a run of odd
/// length), and the first byte when `carry` says it is escaped; the backslashes a run escapes
/// are left out, as only quotes are asked about. `carry`: the block starts with an escaped
/// byte (the last one before it was an unescaped backslash); set for the next block.
///
/// Without a loop over the backslashes, which escaped text (code, logs, JSON arguments) is
/// full of: adding a run's lowest bit to the mask carries through the run to the byte after
/// it, and the run's length is odd when that byte's index and the run's start differ in
/// parity. Runs that start at odd and at even indices are added apart, so each end tells its
/// parity; a run of odd start reaching bit 63 overflows, and escapes the next block's first
/// byte.
#[inline(always)]
fn escaped(backslash: u64, carry: &mut bool) -> u64 {
    // An escaped first byte escapes nothing even if it is a backslash.
    let first = u64::from(*carry);
    let b = backslash & !first;
    let starts = b & !(b << 1);
    let (even_ends, _) = b.overflowing_add(starts & EVEN);
    let (odd_ends, overflow) = b.overflowing_add(starts & !EVEN);
    *carry = overflow;
    first | (even_ends & !b & !EVEN) | (odd_ends & !b & EVEN)
}

/// Bit i is the XOR of bits 0..=i: with the unescaped quotes, the bytes inside strings
/// (opening quote included, closing quote not).
fn prefix_xor(mut x: u64) -> u64 {
    for shift in [1, 2, 4, 8, 16, 32] {
        x ^= x << shift;
    }
    x
}

/// The split by blocks with the index just past the array's `]` (what follows it is not
/// read), or `None` when the array is not cleanly shaped: then `split_bytes` decides and
/// reports. Elements come out exactly as `split_bytes` makes them.
fn split_blocks(b: &[u8]) -> Option<(Vec<&[u8]>, usize)> {
    let open = skip_ws(b, 0);
    if b.get(open) != Some(&b'[') {
        return None;
    }
    let mut out = Vec::new();
    // Where the current element starts, how deep the scan is (the array itself is depth 1),
    // where the current element's containers closed back to depth 1, and how often.
    let (mut start, mut depth, mut closed_at, mut closes) = (open + 1, 0usize, 0, 0);
    let (mut carry, mut in_string) = (false, 0u64);
    let mut element = |from: usize, to: usize, closed_at: usize, closes: usize, last: bool| {
        let part = trim_ws(&b[from..to]);
        let Some(&first) = part.first() else {
            // Only `[]` has an empty element: the closing bracket straight after the opening.
            return last && out.is_empty() && trim_ws(&b[open + 1..to]).is_empty();
        };
        let end = to - (b[from..to].len() - trim_ws_end(&b[from..to]).len()) - 1;
        let ok = if matches!(first, b'{' | b'[') {
            closes == 1 && closed_at == end
        } else {
            closes == 0
        };
        if ok {
            out.push(part);
        }
        ok
    };
    let mut base = 0;
    while base < b.len() {
        let m = match b[base..].first_chunk::<64>() {
            Some(block) => masks(block),
            None => {
                let mut block = [b' '; 64];
                block[..b.len() - base].copy_from_slice(&b[base..]);
                masks(&block)
            }
        };
        let quotes = m.quote & !escaped(m.backslash, &mut carry);
        let inside = prefix_xor(quotes) ^ in_string;
        in_string = 0u64.wrapping_sub(inside >> 63);
        let mut structural = (m.open | m.close | m.comma) & !inside;
        while structural != 0 {
            let p = base + structural.trailing_zeros() as usize;
            structural &= structural - 1;
            match b[p] {
                b'{' | b'[' => depth += 1,
                b',' if depth == 1 => {
                    if !element(start, p, closed_at, closes, false) {
                        return None;
                    }
                    (start, closes) = (p + 1, 0);
                }
                b',' => {}
                _ => {
                    depth = depth.checked_sub(1)?;
                    if depth == 1 {
                        (closed_at, closes) = (p, closes + 1);
                    } else if depth == 0 {
                        let clean = b[p] == b']' && element(start, p, closed_at, closes, true);
                        return clean.then_some((out, p + 1));
                    }
                }
            }
        }
        base += 64;
    }
    None
}

/// The split byte by byte, with an error that says what is wrong and where.
fn split_bytes(b: &[u8]) -> Result<Vec<&[u8]>, CoreError> {
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'[') {
        return Err(malformed(i, "expected `[`"));
    }
    i = skip_ws(b, i + 1);
    let mut out = Vec::new();
    if b.get(i) == Some(&b']') {
        i += 1;
    } else {
        loop {
            let start = i;
            let end = skip_element(b, i)?;
            if end == start {
                return Err(malformed(i, "expected a value"));
            }
            out.push(trim_ws_end(&b[start..end]));
            i = skip_ws(b, end);
            match b.get(i) {
                Some(b',') => i = skip_ws(b, i + 1),
                Some(b']') => {
                    i += 1;
                    break;
                }
                _ => return Err(malformed(i, "expected `,` or `]`")),
            }
        }
    }
    if skip_ws(b, i) != b.len() {
        return Err(malformed(i, "trailing characters"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// Spans that fit give the split's own elements; spans that do not fit give nothing
    /// rather than a wrong element.
    #[test]
    fn at_spans_takes_what_fits_and_refuses_the_rest() {
        let array: &[u8] = br#"[{"a":1}, {"b":[2,3]} ,"c"]"#;
        let split = split(array).unwrap();
        let spans: Vec<(usize, usize)> = split
            .iter()
            .map(|e| {
                let start = e.as_ptr() as usize - array.as_ptr() as usize;
                (start, start + e.len())
            })
            .collect();
        assert_eq!(at_spans(&[array], &spans), Some(split));
        assert_eq!(at_spans(&[array], &[]), Some(vec![]));
        let (a, b) = (spans[0], spans[1]);
        assert_eq!(at_spans(&[array], &[b, a]), None, "out of order");
        assert_eq!(at_spans(&[array], &[(a.0, b.1), b]), None, "overlapping");
        assert_eq!(at_spans(&[array], &[(2, 1)]), None, "reversed");
        assert_eq!(
            at_spans(&[array], &[(0, array.len() + 1)]),
            None,
            "past the end"
        );
        assert_eq!(at_spans(&[array, array], &[a]), None, "two parts");
    }

    /// `escaped` by its definition, one escaping backslash at a time (the scan's former loop;
    /// it also marks the backslashes a run escapes).
    fn escaped_by_bit(mut backslash: u64, carry: &mut bool) -> u64 {
        let mut escaped = 0;
        if *carry {
            // The first byte is escaped, so it escapes nothing even if it is a backslash.
            escaped |= 1;
            backslash &= !1;
        }
        while backslash != 0 {
            let i = backslash.trailing_zeros();
            if i == 63 {
                *carry = true;
                return escaped;
            }
            escaped |= 1 << (i + 1);
            backslash &= !(1 << (i + 1));
            backslash &= backslash - 1;
        }
        *carry = false;
        escaped
    }

    proptest! {
        /// Without its loop, the escape mask is the loop's on every byte but the backslashes.
        #[test]
        fn escapes_as_the_loop_over_backslashes_does(backslash: u64, carry: bool) {
            escapes_as_the_loop(backslash, carry)?;
        }

        #[test]
        fn escapes_runs_as_the_loop_does(
            runs in prop::collection::vec((0u32..8, 0u32..8), 1..12),
            carry: bool,
        ) {
            // Runs of backslashes and gaps: random words rarely hold long runs.
            let (mut backslash, mut at) = (0u64, 0u32);
            for (gap, run) in runs {
                at += gap;
                for _ in 0..run {
                    if at < 64 {
                        backslash |= 1 << at;
                    }
                    at += 1;
                }
            }
            escapes_as_the_loop(backslash, carry)?;
        }
    }

    /// The escape mask and carry of `escaped` against `escaped_by_bit`'s, on every byte but
    /// the backslashes.
    fn escapes_as_the_loop(backslash: u64, carry: bool) -> Result<(), TestCaseError> {
        let (mut a, mut b) = (carry, carry);
        let fast = escaped(backslash, &mut a);
        let slow = escaped_by_bit(backslash, &mut b);
        prop_assert_eq!(fast & !backslash, slow & !backslash);
        prop_assert_eq!(a, b);
        Ok(())
    }

    #[test]
    fn a_form_feed_is_not_whitespace() {
        // It stays in its element, whose parse then fails: `[\x0c]` is no empty array.
        for (text, element) in [
            ("[\x0c]", "\x0c"),
            ("[\x0c1]", "\x0c1"),
            ("[1\x0c]", "1\x0c"),
        ] {
            let parts = split(text.as_bytes()).unwrap();
            assert_eq!(parts, vec![element.as_bytes()], "{text:?}");
            assert_eq!(parts, split_bytes(text.as_bytes()).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn splits_objects_and_scalars() {
        let text = r#" [ {"a":"x,]}\"\\"} , [1,[2]] ,"s\"]", 3 ,null] "#;
        let parts: Vec<&str> = split(text.as_bytes())
            .unwrap()
            .into_iter()
            .map(|p| std::str::from_utf8(p).unwrap())
            .collect();
        assert_eq!(
            parts,
            vec![r#"{"a":"x,]}\"\\"}"#, "[1,[2]]", r#""s\"]""#, "3", "null"]
        );
        assert!(split(b"[]").unwrap().is_empty());
    }

    #[test]
    fn rejects_broken_structure() {
        for bad in [
            "", "{}", "[", "[1", "[1,", r#"["abc"#, "[1] x", "[,]", r#"["\"]"#,
        ] {
            assert!(split(bad.as_bytes()).is_err(), "{bad:?} was accepted");
        }
    }

    proptest! {
        /// On any JSON array, the elements are exactly what serde_json sees.
        #[test]
        fn agrees_with_serde(values in prop::collection::vec(any_json(), 0..8)) {
            let text = serde_json::to_string(&values).unwrap();
            let parts = split(text.as_bytes()).unwrap();
            prop_assert_eq!(parts.len(), values.len());
            for (raw, value) in parts.iter().zip(&values) {
                let parsed: Value = serde_json::from_slice(raw).unwrap();
                prop_assert_eq!(&parsed, value);
            }
        }

        /// Arbitrary text never panics.
        #[test]
        fn never_panics(text in ".{0,64}") {
            let _ = split(text.as_bytes());
        }

        /// On arrays whose strings are long and full of escapes, across block edges, the
        /// block scan splits as the byte scan does.
        #[test]
        fn blocks_split_arrays_as_bytes_do(
            values in prop::collection::vec(any_json(), 0..6),
            long in r#"[a\\"{}\[\],: ]{0,200}"#,
            pretty in any::<bool>(),
        ) {
            let mut values = values;
            values.push(Value::String(long));
            let text = if pretty {
                serde_json::to_string_pretty(&values).unwrap()
            } else {
                serde_json::to_string(&values).unwrap()
            };
            let by_bytes = split_bytes(text.as_bytes()).unwrap();
            prop_assert_eq!(split_blocks(text.as_bytes()), Some((by_bytes, text.len())));
        }

        /// On any text of the characters that matter, the block scan either gives up or
        /// agrees with the byte scan.
        #[test]
        fn blocks_never_split_otherwise(text in r#"[\[\]{},"\\ a1]{0,150}"#) {
            if let Some((parts, end)) = split_blocks(text.as_bytes()) {
                if skip_ws(text.as_bytes(), end) == text.len() {
                    prop_assert_eq!(Some(parts), split_bytes(text.as_bytes()).ok());
                }
            }
        }

        /// Whatever follows it, an array that starts the text splits as it would alone, and
        /// its end is found; text the scan cannot split is left to the caller.
        #[test]
        fn prefixes_split_as_the_array_alone(
            values in prop::collection::vec(any_json(), 0..6),
            after in r#"[\[\]{},"\\ a1:]{0,40}"#,
        ) {
            let array = serde_json::to_string(&values).unwrap();
            let text = format!("{array}{after}");
            let (parts, end) = split_prefix(text.as_bytes()).unwrap();
            prop_assert_eq!(end, array.len());
            prop_assert_eq!(parts, split_bytes(array.as_bytes()).unwrap());
        }

        /// Where the byte-by-byte split reads the same text, the scan splits it the same way.
        /// Text it refuses may still split (a backslash outside a string, which JSON never
        /// holds, reads to the masks as an escape), but then an element is no JSON either,
        /// and parsing it, as every caller does, reports it.
        #[test]
        fn prefixes_never_split_otherwise(text in r#"[\[\]{},"\\ a1]{0,150}"#) {
            if let Some((parts, end)) = split_prefix(text.as_bytes()) {
                match split_bytes(&text.as_bytes()[..end]) {
                    Ok(expected) => prop_assert_eq!(parts, expected),
                    Err(_) => prop_assert!(parts
                        .iter()
                        .any(|p| serde_json::from_slice::<Value>(p).is_err())),
                }
            }
        }

        #[test]
        fn masks_agree_with_a_byte_loop(bytes in prop::collection::vec(
            prop_oneof![Just(b'"'), Just(b'\\'), Just(b'{'), Just(b'}'), Just(b'['),
                        Just(b']'), Just(b','), Just(b';'), Just(b'{' ^ 0x20), any::<u8>()],
            64,
        )) {
            let block: [u8; 64] = bytes.try_into().unwrap();
            prop_assert_eq!(masks(&block), masks_by_byte(&block));
        }
    }

    #[test]
    fn escapes_carry_across_blocks() {
        // 63 bytes, then a backslash at byte 63 that escapes the quote opening the next block.
        let mut text = String::from("[\"");
        text.push_str(&"x".repeat(63 - text.len()));
        text.push_str("\\\"\",\"y\"]");
        let (parts, end) = split_blocks(text.as_bytes()).unwrap();
        assert_eq!((parts.len(), end), (2, text.len()), "{text}");
        assert_eq!(split_bytes(text.as_bytes()).unwrap(), parts);
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            ".{0,12}".prop_map(Value::String),
            r#"[\\"\[\]{},]{0,8}"#.prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(".{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
