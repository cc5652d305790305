//! Tool definitions in the target's shape, and their argument schemas in its dialect: JSON
//! Schema as given for OpenAI and Anthropic (an object schema where Anthropic needs one),
//! under `inputSchema.json` for Bedrock, and reduced to the OpenAPI subset Gemini's
//! `parameters` takes, every keyword left out reported.

use super::portable::Tool;
use super::{Options, Report, Unsupported};
use crate::error::CoreError;
use serde_json::{json, Map, Value};

/// Keywords Gemini's `Schema` takes (Gemini API reference, `Schema`).
const GEMINI_KEYWORDS: [&str; 20] = [
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
];

pub fn write_tools(
    target: &str,
    tools: &[Tool],
    options: &Options,
    report: &mut Report,
) -> Result<Option<Value>, CoreError> {
    if tools.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for tool in tools {
        let (name, description, schema) = match tool {
            Tool::Function {
                name,
                description,
                schema,
            } => (name, description, schema),
            Tool::Hosted { what } => {
                let why = format!("the provider's own tool `{what}` has no equivalent in {target}");
                if options.unsupported == Unsupported::Refuse {
                    return Err(CoreError::InvalidMessage {
                        index: None,
                        reason: format!(
                            "tools: {why} (pass unsupported=\"placeholder\" to leave it out)"
                        ),
                    });
                }
                report.add(None, "dropped", format!("tool:{what}"), why);
                continue;
            }
        };
        let desc = description.clone().unwrap_or_default();
        out.push(match target {
            "openai_chat" => json!({"type": "function", "function": {
                "name": name, "description": desc, "parameters": schema,
            }}),
            "openai_responses" => json!({
                "type": "function", "name": name, "description": desc, "parameters": schema,
            }),
            "anthropic" => json!({
                "name": name, "description": desc, "input_schema": object_schema(schema),
            }),
            "bedrock_converse" => {
                let mut spec =
                    json!({"name": name, "inputSchema": {"json": object_schema(schema)}});
                // Bedrock refuses an empty description (`ToolSpecification.description`: at
                // least one character, optional): a tool without one goes without the field.
                if !desc.is_empty() {
                    spec["description"] = json!(desc);
                }
                json!({ "toolSpec": spec })
            }
            _ => {
                let mut dropped = Vec::new();
                let parameters = gemini_schema(schema, "", &mut dropped);
                for (path, keyword) in dropped {
                    report.add(
                        None,
                        "dropped",
                        format!("schema:{name}{path}.{keyword}"),
                        "a JSON Schema keyword Gemini's schema subset does not take",
                    );
                }
                json!({"name": name, "description": desc, "parameters": parameters})
            }
        });
    }
    if out.is_empty() {
        return Ok(None);
    }
    Ok(Some(if target == "gemini" {
        json!([{ "functionDeclarations": out }])
    } else {
        Value::Array(out)
    }))
}

/// A schema with `type: object` at the top, as Anthropic and Bedrock require.
fn object_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(o) if o.get("type").is_some_and(|t| t == "object") => schema.clone(),
        Value::Object(o) if !o.contains_key("type") => {
            let mut o = o.clone();
            o.insert("type".into(), json!("object"));
            Value::Object(o)
        }
        _ => json!({"type": "object", "properties": {}}),
    }
}

/// `schema` in Gemini's subset: `["x", "null"]` types as `nullable`, `const` as a one-value
/// `enum`, `oneOf` as `anyOf`; other keywords left out, each added to `dropped` with its path.
fn gemini_schema(schema: &Value, path: &str, dropped: &mut Vec<(String, String)>) -> Value {
    let Value::Object(o) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in o {
        match key.as_str() {
            "type" => match value {
                Value::Array(types) => {
                    let real: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                    if real.len() < types.len() {
                        out.insert("nullable".into(), json!(true));
                    }
                    if let Some(first) = real.first() {
                        out.insert("type".into(), (*first).clone());
                    }
                    if real.len() > 1 {
                        dropped.push((path.to_owned(), "type[1:]".to_owned()));
                    }
                }
                _ => {
                    out.insert(key.clone(), value.clone());
                }
            },
            "const" => {
                out.insert("enum".into(), json!([value]));
            }
            "properties" => {
                let props: Map<String, Value> = value
                    .as_object()
                    .map(|p| {
                        p.iter()
                            .map(|(k, v)| {
                                (k.clone(), gemini_schema(v, &format!("{path}.{k}"), dropped))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                out.insert(key.clone(), Value::Object(props));
            }
            "items" => {
                out.insert(
                    key.clone(),
                    gemini_schema(value, &format!("{path}[]"), dropped),
                );
            }
            "anyOf" | "oneOf" => {
                let options: Vec<Value> = value
                    .as_array()
                    .map(|a| a.iter().map(|v| gemini_schema(v, path, dropped)).collect())
                    .unwrap_or_default();
                out.insert("anyOf".into(), Value::Array(options));
            }
            k if GEMINI_KEYWORDS.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            other => dropped.push((path.to_owned(), other.to_owned())),
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bedrock_leaves_out_an_empty_description_which_it_refuses() {
        let tools = [
            Tool::Function {
                name: "status".into(),
                description: None,
                schema: json!({"type": "object"}),
            },
            Tool::Function {
                name: "read".into(),
                description: Some("Read a file".into()),
                schema: json!({"type": "object"}),
            },
        ];
        let mut report = Report::default();
        let out = write_tools("bedrock_converse", &tools, &Options::default(), &mut report);
        let specs: Vec<Value> = out.unwrap().unwrap().as_array().unwrap().clone();
        assert_eq!(specs[0]["toolSpec"].get("description"), None);
        assert_eq!(specs[1]["toolSpec"]["description"], "Read a file");
        assert_eq!(specs[0]["toolSpec"]["name"], "status");
    }

    #[test]
    fn gemini_gets_its_subset_and_every_dropped_keyword_is_named() {
        let schema = json!({
            "type": "object",
            "$schema": "http://json-schema.org/draft-07/schema#",
            "additionalProperties": false,
            "properties": {
                "path": {"type": ["string", "null"], "description": "where"},
                "mode": {"const": "r"},
            },
            "required": ["path"],
        });
        let mut dropped = Vec::new();
        let out = gemini_schema(&schema, "", &mut dropped);
        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "nullable": true, "description": "where"},
                    "mode": {"enum": ["r"]},
                },
                "required": ["path"],
            })
        );
        dropped.sort();
        assert_eq!(
            dropped,
            [
                (String::new(), "$schema".to_owned()),
                (String::new(), "additionalProperties".to_owned())
            ]
        );
    }
}
