//! A JSON object's fields in their order, each value as its own bytes: a body's top level
//! and a provider's system object are read so, and written back with every other byte kept.

use std::borrow::Cow;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

/// A JSON object's fields in their order, each value as its own bytes.
pub struct Fields<'a>(pub(crate) Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Fields<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Ordered;
        impl<'de> Visitor<'de> for Ordered {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Fields<'de>, M::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    out.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Fields(out))
            }
        }
        d.deserialize_map(Ordered)
    }
}

impl<'a> Fields<'a> {
    /// The fields of the object `json`, or why it is not one.
    pub(crate) fn parse(json: &'a str) -> Result<Fields<'a>, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// The value of `key` (the last one when a key repeats, as JSON parsers read it).
    pub fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// The fields in order, as given.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &'a RawValue)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), *v))
    }
}
