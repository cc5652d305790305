//! What the `tools` request parameter costs: the OpenAI cookbook's `num_tokens_for_tools` with
//! its gpt-4o constants, which matched the API's count on the cookbook's example. That formula
//! reads only names, descriptions, property types and enums. Whatever else a tool carries
//! (nested object properties, array `items`, `anyOf`, a property missing its type or
//! description, `strict`, `additionalProperties`, tools that are not functions) is counted too,
//! as the tokens of its compact JSON, so the estimate never ignores content the model is shown.

use serde_json::{Map, Value};

use super::Counter;
use crate::error::CoreError;

/// Per function, before its `name:description` line.
const FUNC_INIT: i64 = 7;
/// Once per function that has properties.
const PROP_INIT: i64 = 3;
/// Per property, before its `name:type:description` line.
const PROP_KEY: i64 = 3;
/// Once per property with an enum; negative, as the cookbook fitted it.
const ENUM_INIT: i64 = -3;
/// Per enum item, besides the item's own tokens.
const ENUM_ITEM: i64 = 3;
/// Once per non-empty `tools` array.
const FUNC_END: i64 = 12;

/// Tokens of an OpenAI `tools` array (`[{"type":"function","function":{"name","description",
/// "parameters"}}]`). An empty array costs nothing. A wrong shape (not an array, an entry not an
/// object, a function without a string name, parameters not an object) is an
/// `InvalidMessage` naming the entry, as in `tools[3]: ...`.
pub fn tools_tokens(tools: &Value, counter: &dyn Counter) -> Result<u32, CoreError> {
    let Value::Array(entries) = tools else {
        return Err(invalid(format!(
            "tools: expected an array, got {}",
            kind(tools)
        )));
    };
    if entries.is_empty() {
        return Ok(0);
    }
    let mut total = FUNC_END;
    for (i, entry) in entries.iter().enumerate() {
        let Value::Object(entry) = entry else {
            return Err(invalid(format!(
                "tools[{i}]: expected an object, got {}",
                kind(entry)
            )));
        };
        total += if entry.get("type").and_then(Value::as_str) == Some("function") {
            function_tool(entry, counter)
                .map_err(|reason| invalid(format!("tools[{i}]: {reason}")))?
        } else {
            // The cookbook knows only functions; any other tool counts as the JSON it is.
            json_tokens(&Value::Object(entry.clone()), counter)
        };
    }
    Ok(u32::try_from(total.max(0)).unwrap_or(u32::MAX))
}

fn function_tool(entry: &Map<String, Value>, counter: &dyn Counter) -> Result<i64, String> {
    let Some(Value::Object(function)) = entry.get("function") else {
        return Err("`function` must be an object".to_owned());
    };
    let Some(Value::String(name)) = function.get("name") else {
        return Err("`function.name` must be a string".to_owned());
    };
    // `null` is what several SDKs write for "no parameters" (the swe-gym sessions do).
    let parameters = match function.get("parameters") {
        None | Some(Value::Null) => None,
        Some(Value::Object(parameters)) => Some(parameters),
        Some(other) => {
            return Err(format!(
                "`function.parameters` must be an object, got {}",
                kind(other)
            ))
        }
    };
    let description = function.get("description").and_then(Value::as_str);
    let mut total = FUNC_INIT
        + text_tokens(
            &format!("{name}:{}", strip_period(description.unwrap_or(""))),
            counter,
        );
    total += unrendered_tokens(entry, |key, _| key == "type" || key == "function", counter);
    total += unrendered_tokens(
        function,
        |key, value| match key {
            "name" | "parameters" => true,
            "description" => value.is_string(),
            _ => false,
        },
        counter,
    );
    if let Some(parameters) = parameters {
        total += parameters_tokens(parameters, counter);
    }
    Ok(total)
}

fn parameters_tokens(parameters: &Map<String, Value>, counter: &dyn Counter) -> i64 {
    let properties = match parameters.get("properties") {
        Some(Value::Object(properties)) => Some(properties),
        _ => None,
    };
    // `required` shows only as optional markers, which the constants account for.
    let mut total = unrendered_tokens(
        parameters,
        |key, value| match key {
            "type" => value == "object",
            "properties" => properties.is_some(),
            "required" => true,
            _ => false,
        },
        counter,
    );
    let Some(properties) = properties.filter(|p| !p.is_empty()) else {
        return total;
    };
    total += PROP_INIT;
    for (name, schema) in properties {
        total += PROP_KEY;
        let Value::Object(schema) = schema else {
            // A boolean schema, or garbage: the line has only the name, the rest is JSON.
            total += text_tokens(&format!("{name}::"), counter) + json_tokens(schema, counter);
            continue;
        };
        let p_type = schema.get("type").and_then(Value::as_str).unwrap_or("");
        let p_desc = schema
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        total += text_tokens(
            &format!("{name}:{p_type}:{}", strip_period(p_desc)),
            counter,
        );
        if let Some(Value::Array(items)) = schema.get("enum") {
            total += ENUM_INIT;
            for item in items {
                total += ENUM_ITEM
                    + match item {
                        Value::String(item) => text_tokens(item, counter),
                        other => json_tokens(other, counter),
                    };
            }
        }
        total += unrendered_tokens(
            schema,
            |key, value| match key {
                "type" | "description" => value.is_string(),
                "enum" => value.is_array(),
                _ => false,
            },
            counter,
        );
    }
    total
}

/// Tokens of the compact JSON of the keys of `object` that the formula does not render, as one
/// object; nothing when every key is rendered.
fn unrendered_tokens(
    object: &Map<String, Value>,
    rendered: impl Fn(&str, &Value) -> bool,
    counter: &dyn Counter,
) -> i64 {
    let rest: Map<String, Value> = object
        .iter()
        .filter(|(key, value)| !rendered(key, value))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if rest.is_empty() {
        0
    } else {
        json_tokens(&Value::Object(rest), counter)
    }
}

fn json_tokens(value: &Value, counter: &dyn Counter) -> i64 {
    text_tokens(&value.to_string(), counter)
}

fn text_tokens(text: &str, counter: &dyn Counter) -> i64 {
    i64::try_from(counter.count(text)).unwrap_or(i64::MAX)
}

/// The cookbook drops one trailing period from descriptions.
fn strip_period(text: &str) -> &str {
    text.strip_suffix('.').unwrap_or(text)
}

fn invalid(reason: String) -> CoreError {
    CoreError::InvalidMessage {
        index: None,
        reason,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::chat::{message_tokens, REPLY_PRIMING};
    use crate::count::{counter, Backend, Encoding};
    use crate::view::{Message, Role};
    use serde_json::json;

    fn weather_tool() -> Value {
        json!([{
            "type": "function",
            "function": {
                "name": "get_current_weather",
                "description": "Get the current weather in a given location",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "location": {
                            "type": "string",
                            "description": "The city and state, e.g. San Francisco, CA",
                        },
                        "unit": {
                            "type": "string",
                            "description": "The unit of temperature to return",
                            "enum": ["celsius", "fahrenheit"],
                        },
                    },
                    "required": ["location"],
                },
            }
        }])
    }

    /// The cookbook's example request: it reports 101 prompt tokens for gpt-4o and gpt-4o-mini,
    /// from its formula and from the API alike.
    #[test]
    fn null_parameters_mean_none() {
        let with_null =
            json!([{"type": "function", "function": {"name": "finish", "parameters": null}}]);
        let without = json!([{"type": "function", "function": {"name": "finish"}}]);
        assert_eq!(
            tools_tokens(&with_null, cl100k()),
            tools_tokens(&without, cl100k())
        );
    }

    #[test]
    fn cookbook_example_matches_the_api() {
        let messages = [
            Message::text(
                Role::System,
                "You are a helpful assistant that can answer to questions about the weather.",
            ),
            Message::text(Role::User, "What's the weather like in San Francisco?"),
        ];
        for backend in [Backend::Tiktoken, Backend::BpeOpenai] {
            let c = counter(Encoding::O200kBase, backend);
            let messages: u32 = messages.iter().map(|m| message_tokens(m, c)).sum();
            let tools = tools_tokens(&weather_tool(), c).unwrap();
            assert_eq!(messages + REPLY_PRIMING + tools, 101);
        }
    }

    fn cl100k() -> &'static dyn Counter {
        counter(Encoding::Cl100kBase, Backend::BpeOpenai)
    }

    fn n(text: &str) -> i64 {
        cl100k().count(text) as i64
    }

    fn tokens(tools: &Value) -> i64 {
        i64::from(tools_tokens(tools, cl100k()).unwrap())
    }

    #[test]
    fn formula_by_hand() {
        let expected = FUNC_END
            + FUNC_INIT
            + n("get_current_weather:Get the current weather in a given location")
            + PROP_INIT
            + PROP_KEY
            + n("location:string:The city and state, e.g. San Francisco, CA")
            + PROP_KEY
            + n("unit:string:The unit of temperature to return")
            + ENUM_INIT
            + (ENUM_ITEM + n("celsius"))
            + (ENUM_ITEM + n("fahrenheit"));
        assert_eq!(tokens(&weather_tool()), expected);
        // The lines pinned with Python tiktoken (cl100k_base): 11, 14, 8, 2 and 2 tokens.
        assert_eq!(
            expected,
            12 + 7 + 11 + 3 + 3 + 14 + 3 + 8 - 3 + (3 + 2) + (3 + 2)
        );
    }

    #[test]
    fn empty_array_costs_nothing() {
        assert_eq!(tokens(&json!([])), 0);
    }

    #[test]
    fn trailing_period_is_dropped_once() {
        let tool = |description: &str| json!([{"type": "function", "function": {"name": "f", "description": description}}]);
        assert_eq!(tokens(&tool("Does things.")), tokens(&tool("Does things")));
        assert_eq!(
            tokens(&tool("Does things..")) - tokens(&tool("Does things")),
            n("f:Does things.") - n("f:Does things")
        );
        // No description and no parameters: the line is just `name:`.
        let bare = json!([{"type": "function", "function": {"name": "ping"}}]);
        assert_eq!(tokens(&bare), FUNC_END + FUNC_INIT + n("ping:"));
    }

    #[test]
    fn content_the_formula_ignores_is_counted_as_json() {
        let base = json!({"type": "string", "description": "A path"});
        let with = |extra: Value| {
            let mut schema = base.clone();
            schema
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            json!([{"type": "function", "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"p": schema}},
            }}])
        };
        let plain = tokens(&with(json!({})));
        for extra in [
            json!({"items": {"type": "string"}}),
            json!({"properties": {"inner": {"type": "integer", "description": "deep"}}}),
            json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
            json!({"default": "/tmp", "minLength": 1}),
        ] {
            let expected = plain + n(&extra.to_string());
            assert_eq!(tokens(&with(extra.clone())), expected, "{extra}");
        }

        // A property without type or description still costs its name, and what it has.
        let untyped = json!([{"type": "function", "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"p": {"anyOf": [{"type": "string"}]}}},
        }}]);
        assert_eq!(
            tokens(&untyped),
            FUNC_END
                + FUNC_INIT
                + n("f:")
                + PROP_INIT
                + PROP_KEY
                + n("p::")
                + n(r#"{"anyOf":[{"type":"string"}]}"#)
        );

        // `strict` on the function, `additionalProperties` on the parameters.
        let strict = json!([{"type": "function", "function": {
            "name": "f",
            "strict": true,
            "parameters": {"type": "object", "properties": {}, "additionalProperties": false},
        }}]);
        assert_eq!(
            tokens(&strict),
            FUNC_END
                + FUNC_INIT
                + n("f:")
                + n(r#"{"strict":true}"#)
                + n(r#"{"additionalProperties":false}"#)
        );

        // Tools that are not functions count as their JSON.
        let search = json!({"type": "web_search", "search_context_size": "low"});
        assert_eq!(
            tokens(&json!([search.clone()])),
            FUNC_END + n(&search.to_string())
        );
    }

    #[test]
    fn enum_items_that_are_not_strings() {
        let tools = json!([{"type": "function", "function": {
            "name": "f",
            "description": "d",
            "parameters": {"type": "object", "properties": {
                "level": {"type": "integer", "description": "How loud", "enum": [1, 2, 10]},
            }},
        }}]);
        let expected = FUNC_END
            + FUNC_INIT
            + n("f:d")
            + PROP_INIT
            + PROP_KEY
            + n("level:integer:How loud")
            + ENUM_INIT
            + 3 * ENUM_ITEM
            + n("1")
            + n("2")
            + n("10");
        assert_eq!(tokens(&tools), expected);
    }

    #[test]
    fn wrong_shapes_name_the_entry() {
        let ok = json!({"type": "function", "function": {"name": "ok"}});
        let cases = [
            (
                json!({"type": "function"}),
                "tools: expected an array, got an object",
            ),
            (json!("tools"), "tools: expected an array, got a string"),
            (json!([ok, 3]), "tools[1]: expected an object, got a number"),
            (
                json!([ok, ok, ok, {"type": "function", "function": {"description": "x"}}]),
                "tools[3]: `function.name` must be a string",
            ),
            (
                json!([{"type": "function", "function": {"name": 7}}]),
                "tools[0]: `function.name` must be a string",
            ),
            (
                json!([{"type": "function", "name": "flat"}]),
                "tools[0]: `function` must be an object",
            ),
            (
                json!([{"type": "function", "function": {"name": "f", "parameters": []}}]),
                "tools[0]: `function.parameters` must be an object, got an array",
            ),
            (
                json!([{"type": "function", "function": {"name": "f", "parameters": "x"}}]),
                "tools[0]: `function.parameters` must be an object, got a string",
            ),
        ];
        for (tools, reason) in cases {
            assert_eq!(
                tools_tokens(&tools, cl100k()),
                Err(CoreError::InvalidMessage {
                    index: None,
                    reason: reason.to_owned(),
                }),
                "{tools}"
            );
        }
    }
}
