//! JSON values named as Python names them: the adapters' error messages were written in Python
//! and callers match on them, so the Rust parsers say `dict`, `list`, `'user'` and `None` too.

use serde_json::Value;

/// The type name Python gives a JSON value.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python's `repr` of a JSON value (strings quoted the way Python quotes them).
pub fn repr(v: &Value) -> String {
    match v {
        Value::String(s) => repr_str(s),
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        other => other.to_string(),
    }
}

/// Python's `repr` of a string: single quotes unless the string holds one and no double quote.
pub fn repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_and_reprs_are_pythons() {
        assert_eq!(type_name(&json!({})), "dict");
        assert_eq!(type_name(&json!(1.5)), "float");
        assert_eq!(repr(&json!("user")), "'user'");
        assert_eq!(repr(&json!("it's")), "\"it's\"");
        assert_eq!(repr(&json!("a'\"b")), "'a\\'\"b'");
        assert_eq!(repr(&json!(null)), "None");
        assert_eq!(repr(&json!("a\nb\u{1}")), "'a\\nb\\x01'");
    }
}
