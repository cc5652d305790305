//! A provider's tool definitions as OpenAI Chat tools, which the core counts: the readings the
//! Python adapters' `tools_to_openai` made, in their words when they refuse.
//!
//! Everything is read from the caller's JSON where it lies (`RawValue`) and written as Python's
//! `json.dumps(out, ensure_ascii=False, separators=(",", ":"))` writes the adapter's list: each
//! object's members in the order the adapter builds them, the caller's objects in the caller's
//! order, numbers as the caller wrote them (Python wrote them), strings escaped as Python
//! escapes them. An Anthropic server tool is counted by its JSON as a description, so its text
//! must be Python's to the byte; the rest is the same bytes because that costs nothing more.

use std::borrow::Cow;
use std::fmt::Display;

use serde_json::value::RawValue;

use super::edit;
use crate::error::CoreError;
use crate::json::write::write_str_as_python;

/// An object's members in order, as `edit::fields` reads them.
type Members<'a> = Vec<(Cow<'a, str>, &'a RawValue)>;

/// One provider's reading: the tools (the elements of the caller's array) as OpenAI tools,
/// each written as its JSON.
type Reader = fn(&[&RawValue]) -> Result<Vec<Vec<u8>>, CoreError>;

/// `tools` (the JSON array the caller gave as the provider's `tools`; Python writes SDK objects
/// and mappings as JSON objects before) as OpenAI Chat tools, written as one JSON array.
///
/// Errors: `InvalidMessage` (no index) for tools the provider's adapter refuses, in its words,
/// and for a provider without a tools reader.
pub fn as_openai(provider: &str, tools: &[u8]) -> Result<Vec<u8>, CoreError> {
    let (not_list, read): (&str, Reader) = match provider {
        "anthropic" => ("tools must be a list of tool objects", anthropic),
        "gemini" => ("tools must be a list", gemini),
        "bedrock_converse" => ("tools must be a list", bedrock_converse),
        // The Responses adapter never checked for a list (it iterated whatever it was
        // given): the others' words.
        "openai_responses" => ("tools must be a list", openai_responses),
        _ => return Err(invalid(format!("no tools reader for {provider}"))),
    };
    let text = std::str::from_utf8(tools).map_err(not_json)?;
    let array: &RawValue = serde_json::from_str(text).map_err(not_json)?;
    let elements =
        edit::elements(array).ok_or_else(|| invalid(format!("{not_list}, got {}", kind(array))))?;
    let written = read(&elements)?;
    let mut out = Vec::with_capacity(written.iter().map(|t| t.len() + 1).sum::<usize>() + 2);
    super::push_array(&mut out, written);
    Ok(out)
}

// --- the providers ------------------------------------------------------------------------

/// Anthropic: a tool with an `input_schema` object as a function of that schema; a server tool
/// (no schema) as a function whose description is its definition, for it is counted as that.
fn anthropic(tools: &[&RawValue]) -> Result<Vec<Vec<u8>>, CoreError> {
    let mut out = Vec::with_capacity(tools.len());
    for (k, &tool) in tools.iter().enumerate() {
        let refused = || invalid(format!("tools[{k}] must be an object with a string `name`"));
        let members = members(tool)?.ok_or_else(refused)?;
        let name = get(&members, "name").map(text).transpose()?.flatten();
        let name = name.ok_or_else(refused)?;
        let mut function = Object::new();
        function.text("name", &name);
        match get(&members, "input_schema").filter(|s| is_object(s)) {
            Some(schema) => {
                let description = get(&members, "description").map(text).transpose()?;
                function.text("description", &description.flatten().unwrap_or_default());
                function.raw("parameters", schema)?;
            }
            None => function.text("description", &definition(&members)?),
        }
        out.push(function_tool(function));
    }
    Ok(out)
}

/// A server tool's definition as Anthropic's adapter counts it: compact JSON of the tool
/// without its `cache_control`, members in the caller's order.
fn definition(members: &Members<'_>) -> Result<String, CoreError> {
    let mut object = Object::new();
    for (key, value) in members.iter().filter(|(k, _)| k != "cache_control") {
        object.raw(key, value)?;
    }
    String::from_utf8(object.end()).map_err(not_json)
}

/// Gemini: each declaration of `functionDeclarations` (or `function_declarations`) as a
/// function; any other member of a tool is a built-in tool (Google Search, code execution,
/// ...), counted as a function named after it.
fn gemini(tools: &[&RawValue]) -> Result<Vec<Vec<u8>>, CoreError> {
    let mut out = Vec::new();
    for (t, &tool) in tools.iter().enumerate() {
        let where_ = format!("tools[{t}]");
        for (key, value) in gemini_object(tool, &where_)? {
            if value.get() == "null" {
                continue;
            }
            if key != "functionDeclarations" && key != "function_declarations" {
                out.push(gemini_function(
                    &key,
                    "",
                    Some(value).filter(|v| is_object(v)),
                )?);
                continue;
            }
            let declarations = edit::elements(value)
                .ok_or_else(|| invalid(format!("{where_}.{key} must be a list")))?;
            for (d, &declaration) in declarations.iter().enumerate() {
                out.push(gemini_declaration(
                    declaration,
                    &format!("{where_}.{key}[{d}]"),
                )?);
            }
        }
    }
    Ok(out)
}

/// One function declaration of a Gemini tool (`where_` names it) as a function.
fn gemini_declaration(declaration: &RawValue, where_: &str) -> Result<Vec<u8>, CoreError> {
    let members = gemini_object(declaration, where_)?;
    let name = get(&members, "name").map(text).transpose()?.flatten();
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| invalid(format!("{where_}.name must be a non-empty string")))?;
    // The first of the schema's spellings that is set, used only when it is an object.
    let parameters = [
        "parametersJsonSchema",
        "parameters_json_schema",
        "parameters",
    ]
    .into_iter()
    .find_map(|key| get(&members, key).filter(|v| v.get() != "null"))
    .filter(|v| is_object(v));
    let description = get(&members, "description").map(text).transpose()?;
    gemini_function(
        &name,
        &description.flatten().unwrap_or_default(),
        parameters,
    )
}

/// The members of a Gemini tool or declaration (`where_` names it), which must be an object.
fn gemini_object<'a>(value: &'a RawValue, where_: &str) -> Result<Members<'a>, CoreError> {
    members(value)?
        .ok_or_else(|| invalid(format!("{where_} must be an object, got {}", kind(value))))
}

/// A Gemini function: `parameters` `{}` unless given.
fn gemini_function(
    name: &str,
    description: &str,
    parameters: Option<&RawValue>,
) -> Result<Vec<u8>, CoreError> {
    let mut function = Object::new();
    function.text("name", name);
    function.text("description", description);
    match parameters {
        Some(parameters) => function.raw("parameters", parameters)?,
        None => function.json("parameters", b"{}"),
    }
    Ok(function_tool(function))
}

/// Bedrock Converse: each `toolSpec` as a function; `cachePoint` entries are no tools.
fn bedrock_converse(tools: &[&RawValue]) -> Result<Vec<Vec<u8>>, CoreError> {
    let mut out = Vec::with_capacity(tools.len());
    for (t, &tool) in tools.iter().enumerate() {
        let (kind, spec) = union_member(tool, &format!("tools[{t}]"))?;
        if kind == "cachePoint" {
            continue;
        }
        if kind != "toolSpec" {
            return Err(invalid(format!(
                "tools[{t}] has type {kind}; expected toolSpec or cachePoint"
            )));
        }
        out.push(bedrock_spec(spec, t)?);
    }
    Ok(out)
}

/// The `toolSpec` of `tools[t]` as a function.
fn bedrock_spec(spec: &RawValue, t: usize) -> Result<Vec<u8>, CoreError> {
    let no_name = || invalid(format!("tools[{t}].toolSpec needs a string `name`"));
    let spec = members(spec)?.ok_or_else(no_name)?;
    let name = get(&spec, "name").map(text).transpose()?.flatten();
    let name = name.ok_or_else(no_name)?;
    let schema = get(&spec, "inputSchema")
        .map(members)
        .transpose()?
        .flatten();
    let parameters = schema
        .as_ref()
        .and_then(|schema| get(schema, "json"))
        .filter(|json| is_object(json))
        .ok_or_else(|| {
            invalid(format!(
                "tools[{t}].toolSpec.inputSchema.json must be an object"
            ))
        })?;
    let mut function = Object::new();
    function.text("name", &name);
    function.raw("parameters", parameters)?;
    if let Some(description) = get(&spec, "description").filter(|d| d.get() != "null") {
        let description = text(description)?
            .ok_or_else(|| invalid(format!("tools[{t}].toolSpec.description must be a string")))?;
        function.text("description", &description);
    }
    Ok(function_tool(function))
}

/// The one member a Bedrock union block (`where_` names it) sets, members set to null being
/// absent.
fn union_member<'a>(
    block: &'a RawValue,
    where_: &str,
) -> Result<(Cow<'a, str>, &'a RawValue), CoreError> {
    let members = members(block)?
        .ok_or_else(|| invalid(format!("{where_} must be an object, got {}", kind(block))))?;
    let mut set: Vec<(Cow<'a, str>, &'a RawValue)> = members
        .into_iter()
        .filter(|(_, v)| v.get() != "null")
        .collect();
    match set.pop() {
        Some(member) if set.is_empty() => Ok(member),
        last => {
            let mut keys: Vec<&str> = set.iter().chain(last.as_ref()).map(|(k, _)| &**k).collect();
            keys.sort_unstable();
            Err(invalid(format!(
                "{where_} must set exactly one block type, got {}",
                py_list_repr(&keys)
            )))
        }
    }
}

/// OpenAI Responses: a function tool flattened as Responses writes it (`{"type": "function",
/// "name": ...}`) in Chat's shape; every other tool (custom, hosted, MCP, or already in Chat's
/// shape) as given, which the core counts as the JSON it is.
fn openai_responses(tools: &[&RawValue]) -> Result<Vec<Vec<u8>>, CoreError> {
    let mut out = Vec::with_capacity(tools.len());
    for (i, &tool) in tools.iter().enumerate() {
        let members =
            members(tool)?.ok_or_else(|| invalid(format!("tools[{i}] must be an object")))?;
        let kind = get(&members, "type").map(text).transpose()?.flatten();
        if kind.as_deref() != Some("function") || get(&members, "function").is_some() {
            let mut given = Vec::with_capacity(tool.get().len());
            compact(tool.get(), &mut given)?;
            out.push(given);
            continue;
        }
        let mut function = Object::new();
        // Each member present is copied, null included; `strict` only when set.
        for key in ["name", "description", "parameters"] {
            if let Some(value) = get(&members, key) {
                function.raw(key, value)?;
            }
        }
        if let Some(strict) = get(&members, "strict").filter(|s| s.get() != "null") {
            function.raw("strict", strict)?;
        }
        out.push(function_tool(function));
    }
    Ok(out)
}

// --- reading ------------------------------------------------------------------------------

/// The reason as a refusal of the whole `tools` (no message index).
fn invalid(reason: String) -> CoreError {
    CoreError::InvalidMessage {
        index: None,
        reason,
    }
}

/// Input that is not JSON, or JSON whose text cannot be read (a lone surrogate).
fn not_json(e: impl Display) -> CoreError {
    invalid(format!("tools are not JSON ({e})"))
}

/// A JSON value's kind in words, where the adapters named the Python type.
fn kind(value: &RawValue) -> &'static str {
    match value.get().as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "a list",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

fn is_object(value: &RawValue) -> bool {
    value.get().starts_with('{')
}

/// The members of `value` in order when it is an object (None when it is not).
fn members(value: &RawValue) -> Result<Option<Members<'_>>, CoreError> {
    if !is_object(value) {
        return Ok(None);
    }
    edit::fields(value)
        .map(Some)
        .ok_or_else(|| not_json("an object's keys cannot be read"))
}

/// The member `key` of an object, null included: its last one, the one a Python dict read
/// from the JSON holds.
fn get<'a>(members: &Members<'a>, key: &str) -> Option<&'a RawValue> {
    members
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| *v)
}

/// The text `value` holds when it is a string (None when it is not).
fn text(value: &RawValue) -> Result<Option<Cow<'_, str>>, CoreError> {
    if !value.get().starts_with('"') {
        return Ok(None);
    }
    edit::string(value)
        .map(Some)
        .ok_or_else(|| not_json("a string cannot be read"))
}

// --- writing ------------------------------------------------------------------------------

/// A JSON object written member by member, in the order they are added.
struct Object(Vec<u8>);

impl Object {
    fn new() -> Object {
        Object(vec![b'{'])
    }

    fn key(&mut self, key: &str) {
        if self.0.len() > 1 {
            self.0.push(b',');
        }
        write_str_as_python(&mut self.0, key);
        self.0.push(b':');
    }

    /// A string member.
    fn text(&mut self, key: &str, value: &str) {
        self.key(key);
        write_str_as_python(&mut self.0, value);
    }

    /// A member of the caller's JSON, written compact.
    fn raw(&mut self, key: &str, value: &RawValue) -> Result<(), CoreError> {
        self.key(key);
        compact(value.get(), &mut self.0)
    }

    /// A member whose JSON is written already.
    fn json(&mut self, key: &str, value: &[u8]) {
        self.key(key);
        self.0.extend_from_slice(value);
    }

    fn end(mut self) -> Vec<u8> {
        self.0.push(b'}');
        self.0
    }
}

/// `{"type": "function", "function": function}`.
fn function_tool(function: Object) -> Vec<u8> {
    let mut out = br#"{"type":"function","function":"#.to_vec();
    out.extend_from_slice(&function.end());
    out.push(b'}');
    out
}

/// The valid JSON `json` as Python's compact encoder writes what `json.loads` reads of it: no
/// space between tokens, strings re-escaped as Python escapes them (`\u00e9` becomes `é`),
/// every other token (numbers above all) and the members' order as written. One pass.
fn compact(json: &str, out: &mut Vec<u8>) -> Result<(), CoreError> {
    let bytes = json.as_bytes();
    out.reserve(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                let (end, escaped) = string_end(bytes, i);
                let literal = json
                    .get(i..end)
                    .ok_or_else(|| not_json("a string is cut"))?;
                if escaped {
                    let decoded: String = serde_json::from_str(literal).map_err(not_json)?;
                    write_str_as_python(out, &decoded);
                } else {
                    // No escape and (being JSON) no control character: Python writes it as is.
                    out.extend_from_slice(literal.as_bytes());
                }
                i = end;
            }
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(())
}

/// Where the JSON string opening at `start` ends (past its closing quote), and whether it
/// holds an escape.
fn string_end(bytes: &[u8], start: usize) -> (usize, bool) {
    let (mut j, mut escaped) = (start + 1, false);
    while let Some(&b) = bytes.get(j) {
        match b {
            b'\\' => {
                escaped = true;
                j += 2;
            }
            b'"' => return (j + 1, escaped),
            _ => j += 1,
        }
    }
    (bytes.len(), escaped)
}

// --- Python's repr, for Bedrock's refusal that quotes a list of keys ----------------------

/// `repr(keys)` of a Python list of strings: `['a', 'b']`.
fn py_list_repr(keys: &[&str]) -> String {
    let quoted: Vec<String> = keys
        .iter()
        .map(|k| crate::providers::pynames::repr_str(k))
        .collect();
    format!("[{}]", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn read(provider: &str, tools: &str) -> Result<Value, CoreError> {
        let out = as_openai(provider, tools.as_bytes())?;
        Ok(serde_json::from_slice(&out).expect("the output is JSON"))
    }

    fn written(provider: &str, tools: &str) -> String {
        String::from_utf8(as_openai(provider, tools.as_bytes()).expect("read")).expect("utf-8")
    }

    fn refusal(provider: &str, tools: &str) -> String {
        match as_openai(provider, tools.as_bytes()) {
            Err(CoreError::InvalidMessage {
                index: None,
                reason,
            }) => reason,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    // --- every provider

    #[test]
    fn unknown_provider_is_refused() {
        assert_eq!(
            refusal("openai_chat", "[]"),
            "no tools reader for openai_chat"
        );
    }

    #[test]
    fn input_that_is_not_json_is_refused() {
        for provider in [
            "anthropic",
            "gemini",
            "bedrock_converse",
            "openai_responses",
        ] {
            assert!(refusal(provider, "[{").starts_with("tools are not JSON ("));
            assert!(as_openai(provider, b"[\xff]").is_err());
            assert_eq!(read(provider, " [ ] ").unwrap(), json!([]));
        }
    }

    #[test]
    fn input_that_is_not_a_list_is_refused_in_each_providers_words() {
        assert_eq!(
            refusal("anthropic", "{}"),
            "tools must be a list of tool objects, got an object"
        );
        assert_eq!(
            refusal("gemini", "\"x\""),
            "tools must be a list, got a string"
        );
        assert_eq!(
            refusal("bedrock_converse", "1"),
            "tools must be a list, got a number"
        );
        assert_eq!(
            refusal("openai_responses", "null"),
            "tools must be a list, got null"
        );
    }

    // --- Anthropic

    #[test]
    fn anthropic_custom_tool_is_a_function_of_its_schema() {
        let tools = r#"[{"name": "get", "description": "Gets.", "cache_control": {"type": "ephemeral"},
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]"#;
        assert_eq!(
            written("anthropic", tools),
            r#"[{"type":"function","function":{"name":"get","description":"Gets.","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]"#
        );
        // A description that is not a string is none.
        let tools = r#"[{"name": "get", "description": 3, "input_schema": {}}]"#;
        assert_eq!(
            read("anthropic", tools).unwrap(),
            json!([{"type": "function", "function": {"name": "get", "description": "", "parameters": {}}}])
        );
    }

    #[test]
    fn anthropic_server_tool_is_described_by_its_compact_definition_in_the_callers_order() {
        let tools = r#"[{"type": "web_search_20250305", "name": "web_search",
            "cache_control": {"type": "ephemeral"}, "max_uses": 5,
            "allowed_domains": ["ex\u00e9mple.com", "b\/c"], "user_location": {"z": 1, "a": "é\b"}}]"#;
        let got = read("anthropic", tools).unwrap();
        assert_eq!(
            got[0]["function"]["description"],
            r#"{"type":"web_search_20250305","name":"web_search","max_uses":5,"allowed_domains":["exémple.com","b/c"],"user_location":{"z":1,"a":"é\b"}}"#
        );
        assert_eq!(got[0]["function"]["name"], "web_search");
        assert_eq!(got[0]["type"], "function");
        // An `input_schema` that is not an object makes a server tool too, kept in its text.
        let got = read("anthropic", r#"[{"name": "x", "input_schema": null}]"#).unwrap();
        assert_eq!(
            got[0]["function"]["description"],
            r#"{"name":"x","input_schema":null}"#
        );
        assert_eq!(got[0]["function"].as_object().map(|f| f.len()), Some(2));
    }

    #[test]
    fn anthropic_refuses_a_tool_without_a_string_name() {
        for tools in [
            r#"[{"name": 1}]"#,
            r#"[{}]"#,
            r#"[{"name": "a"}, []]"#,
            r#"[{"name": null}]"#,
        ] {
            let k = usize::from(tools.contains("[]"));
            assert_eq!(
                refusal("anthropic", tools),
                format!("tools[{k}] must be an object with a string `name`")
            );
        }
    }

    // --- Gemini

    #[test]
    fn gemini_declarations_are_functions() {
        let tools = r#"[{"functionDeclarations": [
            {"name": "a", "description": "A.", "parameters": {"type": "OBJECT"}},
            {"name": "b", "parametersJsonSchema": {"type": "object"}, "parameters": {"x": 1}},
            {"name": "c", "description": 4, "parameters": [1]}]}]"#;
        assert_eq!(
            written("gemini", tools),
            concat!(
                r#"[{"type":"function","function":{"name":"a","description":"A.","parameters":{"type":"OBJECT"}}},"#,
                r#"{"type":"function","function":{"name":"b","description":"","parameters":{"type":"object"}}},"#,
                r#"{"type":"function","function":{"name":"c","description":"","parameters":{}}}]"#
            )
        );
    }

    #[test]
    fn gemini_reads_snake_case_built_in_tools_and_skips_nulls() {
        let tools = r#"[{"function_declarations": [{"name": "f", "parametersJsonSchema": null,
                "parameters_json_schema": {"s": 1}, "parameters": {"p": 1}}],
            "google_search": {"x": 1}, "codeExecution": {}, "retrieval": null, "urlContext": 3},
            {"functionDeclarations": null}]"#;
        assert_eq!(
            read("gemini", tools).unwrap(),
            json!([
                {"type": "function", "function": {"name": "f", "description": "", "parameters": {"s": 1}}},
                {"type": "function", "function": {"name": "google_search", "description": "", "parameters": {"x": 1}}},
                {"type": "function", "function": {"name": "codeExecution", "description": "", "parameters": {}}},
                {"type": "function", "function": {"name": "urlContext", "description": "", "parameters": {}}},
            ])
        );
        // The first schema spelling set wins even when it is no object.
        let tools = r#"[{"functionDeclarations": [{"name": "f", "parametersJsonSchema": 1, "parameters": {"p": 1}}]}]"#;
        assert_eq!(
            read("gemini", tools).unwrap()[0]["function"]["parameters"],
            json!({})
        );
    }

    #[test]
    fn gemini_refusals() {
        assert_eq!(
            refusal("gemini", "[3]"),
            "tools[0] must be an object, got a number"
        );
        assert_eq!(
            refusal("gemini", r#"[{}, {"functionDeclarations": {}}]"#),
            "tools[1].functionDeclarations must be a list"
        );
        assert_eq!(
            refusal(
                "gemini",
                r#"[{"function_declarations": [{"name": "a"}, true]}]"#
            ),
            "tools[0].function_declarations[1] must be an object, got a boolean"
        );
        for name in ["\"\"", "1", "null"] {
            let tools = format!(r#"[{{"functionDeclarations": [{{"name": {name}}}]}}]"#);
            assert_eq!(
                refusal("gemini", &tools),
                "tools[0].functionDeclarations[0].name must be a non-empty string"
            );
        }
    }

    // --- Bedrock Converse

    #[test]
    fn bedrock_tool_specs_are_functions_and_cache_points_are_skipped() {
        let tools = r#"[{"toolSpec": {"name": "a", "description": "A.", "inputSchema": {"json": {"type": "object"}}}},
            {"cachePoint": {"type": "default"}, "toolSpec": null},
            {"toolSpec": {"name": "b", "description": null, "inputSchema": {"json": {}}}}]"#;
        assert_eq!(
            written("bedrock_converse", tools),
            concat!(
                r#"[{"type":"function","function":{"name":"a","parameters":{"type":"object"},"description":"A."}},"#,
                r#"{"type":"function","function":{"name":"b","parameters":{}}}]"#
            )
        );
    }

    #[test]
    fn bedrock_refusals() {
        let spec = |s: &str| refusal("bedrock_converse", &format!(r#"[{{"toolSpec": {s}}}]"#));
        assert_eq!(
            spec(r#"{"name": "a", "description": 1, "inputSchema": {"json": {}}}"#),
            "tools[0].toolSpec.description must be a string"
        );
        assert_eq!(
            spec(r#"{"inputSchema": {"json": {}}}"#),
            "tools[0].toolSpec needs a string `name`"
        );
        assert_eq!(spec("[]"), "tools[0].toolSpec needs a string `name`");
        for schema in [r#"{"json": null}"#, r#"{"json": []}"#, "3", "{}"] {
            assert_eq!(
                spec(&format!(r#"{{"name": "a", "inputSchema": {schema}}}"#)),
                "tools[0].toolSpec.inputSchema.json must be an object"
            );
        }
        assert_eq!(
            spec(r#"{"name": "a"}"#),
            "tools[0].toolSpec.inputSchema.json must be an object"
        );
        assert_eq!(
            refusal("bedrock_converse", "[[]]"),
            "tools[0] must be an object, got a list"
        );
        assert_eq!(
            refusal("bedrock_converse", r#"[{"toolSpec": null}]"#),
            "tools[0] must set exactly one block type, got []"
        );
        assert_eq!(
            refusal(
                "bedrock_converse",
                r#"[{"z": 1, "toolSpec": {}, "it's": 2, "a\"'\n\u00a0": 3}]"#
            ),
            r#"tools[0] must set exactly one block type, got ['a"\'\n\xa0', "it's", 'toolSpec', 'z']"#
        );
        assert_eq!(
            refusal(
                "bedrock_converse",
                r#"[{"cachePoint": {}}, {"guardContent": {}}]"#
            ),
            "tools[1] has type guardContent; expected toolSpec or cachePoint"
        );
    }

    // --- OpenAI Responses

    #[test]
    fn responses_function_tools_are_flattened_and_others_given() {
        let tools = r#"[{"type": "function", "name": "f", "strict": true, "parameters": {"b": 1, "a": 2}, "description": "F."},
            {"type": "function", "name": "g", "strict": null, "description": null},
            {"type": "web_search_preview", "search_context_size": "low"},
            {"type": "function", "function": {"name": "h"}, "extra": [1, 2.50]}]"#;
        assert_eq!(
            written("openai_responses", tools),
            concat!(
                r#"[{"type":"function","function":{"name":"f","description":"F.","parameters":{"b":1,"a":2},"strict":true}},"#,
                r#"{"type":"function","function":{"name":"g","description":null}},"#,
                r#"{"type":"web_search_preview","search_context_size":"low"},"#,
                r#"{"type":"function","function":{"name":"h"},"extra":[1,2.50]}]"#
            )
        );
    }

    #[test]
    fn responses_refuses_a_tool_that_is_not_an_object() {
        assert_eq!(
            refusal("openai_responses", r#"[{"type": "x"}, "f"]"#),
            "tools[1] must be an object"
        );
    }

    // --- writing

    #[test]
    fn compact_writes_as_python_does() {
        let mut out = Vec::new();
        compact(
            "{ \"a\" : [ 1 , -2.5e+10 , true ] ,\n\t\"\\u00e9\\/\\u0008\\u001f\\\"\" : \"x y\" }",
            &mut out,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"a\":[1,-2.5e+10,true],\"é/\\b\\u001f\\\"\":\"x y\"}"
        );
        let mut out = Vec::new();
        assert!(compact(r#""\ud800""#, &mut out).is_err());
    }

    #[test]
    fn py_repr_quotes_as_python_does() {
        assert_eq!(crate::providers::pynames::repr_str("a"), "'a'");
        assert_eq!(crate::providers::pynames::repr_str("it's"), "\"it's\"");
        assert_eq!(crate::providers::pynames::repr_str("'\""), r#"'\'"'"#);
        assert_eq!(
            crate::providers::pynames::repr_str("\\\u{7f}\u{200b}é\u{10fffd}"),
            r"'\\\x7f\u200bé\U0010fffd'"
        );
    }
}
