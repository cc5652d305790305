//! The JSON helpers the core and every provider use: a canonical message read from its JSON,
//! an object's fields in order as their own bytes, and strings written as JSON.

pub mod fields;
pub mod message;
pub mod write;

use serde_json::Value;

/// A JSON value's kind in words (`a list`, `an object`), as the OpenAI parsers' errors say it.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
