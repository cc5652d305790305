//! Edits of a native item's JSON where it lies: one value replaced, or one field added, every
//! other byte as the caller wrote it. An item the core rewrites (a cut tool result) thus goes
//! out as the caller's item but for what the rewrite changes, and a session whose item is
//! rewritten the same way every turn sends the same bytes every turn.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::within;

/// Bytes of a JSON document to replace, and what replaces them.
pub(crate) type Edit = (Range<usize>, Vec<u8>);

/// `json` with each edit applied; None when two edits overlap or one does not lie in it.
pub(crate) fn spliced(json: &[u8], mut edits: Vec<Edit>) -> Option<Vec<u8>> {
    edits.sort_by_key(|(range, _)| range.start);
    let grown: usize = edits.iter().map(|(_, bytes)| bytes.len()).sum();
    let mut out = Vec::with_capacity(json.len() + grown);
    let mut from = 0;
    for (range, bytes) in edits {
        if range.start < from || range.end > json.len() {
            return None;
        }
        out.extend_from_slice(&json[from..range.start]);
        out.extend_from_slice(&bytes);
        from = range.end;
    }
    out.extend_from_slice(&json[from..]);
    Some(out)
}

/// The elements of the array under `key` in the JSON object `item`: None when `item` is no
/// JSON object, `Some(None)` when it holds no such array.
pub(crate) fn array_field<'a>(item: &'a [u8], key: &str) -> Option<Option<Vec<&'a RawValue>>> {
    let object: &RawValue = serde_json::from_slice(item).ok()?;
    Some(field(object, key).and_then(elements))
}

/// `item` with `edits` applied, as a provider's rewrite answers: `Some(None)` when there are
/// none (the item goes out as it is), None when they do not apply.
pub(crate) fn applied(item: &[u8], edits: Vec<Edit>) -> Option<Option<Vec<u8>>> {
    if edits.is_empty() {
        return Some(None);
    }
    spliced(item, edits).map(Some)
}

/// The edit setting field `key` of `object` (a JSON object read from `json`) to the JSON
/// `value`: the value of its last such field replaced (the one a reader keeps), else a new
/// last field, where a Python dict puts a key it did not have. None when `object` is not an
/// object lying in `json`.
pub(crate) fn set_field(json: &[u8], object: &RawValue, key: &str, value: Vec<u8>) -> Option<Edit> {
    let at = within(json, object)?;
    let fields = fields(object)?;
    if let Some((_, old)) = fields.iter().rev().find(|(k, _)| k == key) {
        return Some((within(json, old)?, value));
    }
    // The object's closing brace: a raw value is its bytes, without surrounding space.
    let end = at.end.checked_sub(1)?;
    let mut field = Vec::with_capacity(key.len() + value.len() + 4);
    if !fields.is_empty() {
        field.push(b',');
    }
    field.extend_from_slice(super::json_string(key).as_bytes());
    field.push(b':');
    field.extend_from_slice(&value);
    Some((end..end, field))
}

/// The fields of a JSON object in order, each value where it lies; None for what is not an
/// object.
pub(crate) fn fields(object: &RawValue) -> Option<Vec<(Cow<'_, str>, &RawValue)>> {
    struct Fields;
    impl<'de> Visitor<'de> for Fields {
        type Value = Vec<(Cow<'de, str>, &'de RawValue)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(key) = map.next_key::<Key<'de>>()? {
                out.push((key.0, map.next_value::<&'de RawValue>()?));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(object.get());
    (&mut de).deserialize_map(Fields).ok()
}

/// A key, borrowed unless it holds an escape.
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(s))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(s.to_owned()))
            }
        }
        de.deserialize_str(Text).map(Key)
    }
}

/// The field `key` of `object` (its last one), if any.
pub(crate) fn field<'a>(object: &'a RawValue, key: &str) -> Option<&'a RawValue> {
    last(&fields(object)?, key)
}

/// The value of field `key` (its last one) among `fields`, unless absent or null.
pub(crate) fn last<'a>(fields: &[(Cow<'_, str>, &'a RawValue)], key: &str) -> Option<&'a RawValue> {
    fields
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| *v)
        .filter(|v| v.get() != "null")
}

/// The string `value` holds, if it is one.
pub(crate) fn string(value: &RawValue) -> Option<Cow<'_, str>> {
    let got: Key<'_> = serde_json::from_str(value.get()).ok()?;
    Some(got.0)
}

/// The elements of `value`, if it is an array.
pub(crate) fn elements(value: &RawValue) -> Option<Vec<&RawValue>> {
    serde_json::from_str(value.get()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-c\"é/]{0,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// `object` written with spacing, and with its keys escaped when `escaped`, as a caller
    /// might send it.
    fn written(object: &serde_json::Map<String, Value>, escaped: bool) -> String {
        let fields: Vec<String> = object
            .iter()
            .map(|(k, v)| {
                let key = if escaped {
                    let mut out = String::from("\"");
                    for c in k.chars() {
                        out.push_str(&format!("\\u{:04x}", u32::from(c)));
                    }
                    out.push('"');
                    out
                } else {
                    super::super::json_string(k)
                };
                format!("{key} : {v}")
            })
            .collect();
        format!("{{ {} }}", fields.join(" , "))
    }

    proptest! {
        /// Setting a field of any object, written with spacing and escaped keys, reads back as
        /// the object with that field set, every other field as it was.
        #[test]
        fn a_field_set_reads_back_as_the_object_with_it(
            object in prop::collection::btree_map("[a-c\"é/]{0,3}", any_json(), 0..5),
            key in "[a-c\"é/]{0,3}",
            value in any_json(),
            escaped in any::<bool>(),
        ) {
            let object: serde_json::Map<String, Value> = object.into_iter().collect();
            let json = written(&object, escaped);
            let raw: &RawValue = serde_json::from_str(&json).unwrap();
            let read: Vec<String> =
                fields(raw).unwrap().into_iter().map(|(k, _)| k.into_owned()).collect();
            prop_assert_eq!(read, object.keys().cloned().collect::<Vec<_>>());
            let bytes = value.to_string().into_bytes();
            let edit = set_field(json.as_bytes(), raw, &key, bytes).unwrap();
            let out = spliced(json.as_bytes(), vec![edit]).unwrap();
            let out: Value = serde_json::from_slice(&out).unwrap();
            let mut expected = object.clone();
            expected.insert(key, value);
            prop_assert_eq!(out, Value::Object(expected));
        }
    }

    fn raw(json: &str) -> &RawValue {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_field_is_replaced_where_it_lies_or_added_last() {
        let json = r#"{"a": 1, "b" : [2, 3] , "c":{"d":4}}"#;
        let object = raw(json);
        let edit = set_field(json.as_bytes(), object, "b", b"\"x\"".to_vec()).unwrap();
        let out = spliced(json.as_bytes(), vec![edit]).unwrap();
        assert_eq!(out, br#"{"a": 1, "b" : "x" , "c":{"d":4}}"#);
        let edit = set_field(json.as_bytes(), object, "e", b"5".to_vec()).unwrap();
        let out = spliced(json.as_bytes(), vec![edit]).unwrap();
        assert_eq!(out, br#"{"a": 1, "b" : [2, 3] , "c":{"d":4},"e":5}"#);
        let empty = "{ }";
        let edit = set_field(empty.as_bytes(), raw(empty), "k", b"1".to_vec()).unwrap();
        assert_eq!(
            spliced(empty.as_bytes(), vec![edit]).unwrap(),
            br#"{ "k":1}"#
        );
    }

    #[test]
    fn the_last_of_repeated_keys_is_the_one_set_and_escaped_keys_are_read() {
        let json = r#"{"k":1,"k":2,"\u006b2":3}"#;
        let object = raw(json);
        let edit = set_field(json.as_bytes(), object, "k", b"9".to_vec()).unwrap();
        assert_eq!(
            spliced(json.as_bytes(), vec![edit]).unwrap(),
            br#"{"k":1,"k":9,"\u006b2":3}"#
        );
        assert_eq!(field(object, "k2").map(RawValue::get), Some("3"));
        assert!(fields(raw("[1]")).is_none());
        assert_eq!(string(raw(r#""a\nb""#)).as_deref(), Some("a\nb"));
    }

    #[test]
    fn overlapping_edits_are_refused() {
        let json = b"[1,2,3]";
        assert!(spliced(json, vec![(1..4, b"0".to_vec()), (3..5, b"0".to_vec())]).is_none());
        assert_eq!(
            spliced(json, vec![(5..6, b"9".to_vec()), (1..2, b"0".to_vec())]).unwrap(),
            b"[0,2,9]"
        );
    }
}
