//! Splits a JSON array into the raw text of its elements without building any value: on the
//! warm path (every message already cached) this scan and one hash per element is all the
//! work a message costs. Elements are parsed properly, by serde_json, only on a cache miss.

use memchr::memchr;

use crate::error::CoreError;

fn malformed(at: usize, what: &str) -> CoreError {
    CoreError::InvalidMessage {
        index: None,
        reason: format!("messages must be a JSON array of message objects ({what} at byte {at})"),
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\n' | b'\r' | b'\t') {
        i += 1;
    }
    i
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
/// element is parsed, not here). Structure errors between
/// elements are reported here; an element's own syntax is checked when it is parsed.
pub fn split(b: &[u8]) -> Result<Vec<&[u8]>, CoreError> {
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
            out.push(b[start..end].trim_ascii_end());
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
