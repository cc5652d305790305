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

/// Python's `repr` of a string: single quotes unless the string holds one and no double quote;
/// the quote, backslash and what Python does not print escaped.
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
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if py_printable(c) => out.push(c),
            c => {
                let n = u32::from(c);
                let escaped = match n {
                    0..=0xff => format!("\\x{n:02x}"),
                    0x100..=0xffff => format!("\\u{n:04x}"),
                    _ => format!("\\U{n:08x}"),
                };
                out.push_str(&escaped);
            }
        }
    }
    out.push(quote);
    out
}

/// Python's `str.isprintable` of one character: not a control, format, separator (but the
/// space), private-use or surrogate character. Unassigned code points, which Python also
/// escapes, are printed: telling them needs the Unicode tables.
fn py_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    // White_Space beyond the space is exactly the separators (Zs, Zl, Zp) and some controls.
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(u32::from(c),
        0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x890..=0x891 | 0x8e2 | 0x180e
        | 0x200b..=0x200f | 0x202a..=0x202e | 0x2060..=0x2064 | 0x2066..=0x206f | 0xfeff
        | 0xfff9..=0xfffb | 0x110bd | 0x110cd | 0x13430..=0x1343f | 0x1bca0..=0x1bca3
        | 0x1d173..=0x1d17a | 0xe0001 | 0xe0020..=0xe007f
        | 0xe000..=0xf8ff | 0xf0000..=0xffffd | 0x100000..=0x10fffd)
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
