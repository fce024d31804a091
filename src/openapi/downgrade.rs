//! utoipa emits OpenAPI 3.1; Tern's interface promises 3.0. This turns the
//! generated document into a valid 3.0.3 one: nullable types, examples,
//! exclusive bounds, `$ref` siblings, and keywords 3.0 does not know.

use serde_json::{json, Map, Value};

pub const OPENAPI_VERSION: &str = "3.0.3";

/// JSON Schema keywords of 3.1 that a 3.0 validator rejects.
const KEYWORDS_3_1_ONLY: [&str; 14] = [
    "$schema",
    "$id",
    "$anchor",
    "$defs",
    "$comment",
    "contentMediaType",
    "contentEncoding",
    "unevaluatedProperties",
    "prefixItems",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "if",
    "then",
];

pub fn downgrade_to_3_0(mut doc: Value) -> Value {
    let Some(root) = doc.as_object_mut() else {
        return doc;
    };
    root.insert("openapi".into(), json!(OPENAPI_VERSION));
    for key in ["jsonSchemaDialect", "webhooks"] {
        root.remove(key);
    }
    if let Some(info) = root.get_mut("info").and_then(Value::as_object_mut) {
        info.remove("summary");
        if let Some(license) = info.get_mut("license").and_then(Value::as_object_mut) {
            license.remove("identifier");
        }
    }
    if let Some(components) = root.get_mut("components").and_then(Value::as_object_mut) {
        components.remove("pathItems");
        if let Some(schemas) = components.get_mut("schemas").and_then(Value::as_object_mut) {
            schemas.values_mut().for_each(downgrade_schema);
        }
    }
    for key in ["paths", "components"] {
        if let Some(section) = root.get_mut(key) {
            downgrade_embedded_schemas(section);
        }
    }
    if let Some(paths) = root.get_mut("paths").and_then(Value::as_object_mut) {
        paths.values_mut().for_each(describe_responses);
    }
    doc
}

/// 3.0 requires a description on every response; utoipa leaves it out when
/// an annotation gives none. The status's reason phrase stands in.
fn describe_responses(path_item: &mut Value) {
    let Some(operations) = path_item.as_object_mut() else {
        return;
    };
    for operation in operations.values_mut() {
        let Some(responses) = operation
            .get_mut("responses")
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        for (status, response) in responses.iter_mut() {
            if let Some(response) = response.as_object_mut() {
                if !response.contains_key("description") && !response.contains_key("$ref") {
                    let reason = status
                        .parse::<u16>()
                        .ok()
                        .and_then(|code| actix_web::http::StatusCode::from_u16(code).ok())
                        .and_then(|code| code.canonical_reason())
                        .unwrap_or("Response");
                    response.insert("description".into(), json!(reason));
                }
            }
        }
    }
}

/// Finds every `schema` member (parameters, media types, headers) below
/// `value` and downgrades it.
fn downgrade_embedded_schemas(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if key == "schema" {
                    downgrade_schema(child);
                } else if key != "schemas" {
                    downgrade_embedded_schemas(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(downgrade_embedded_schemas),
        _ => {}
    }
}

/// Downgrades one schema and, recursively, the schemas inside it.
pub fn downgrade_schema(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    for keyword in KEYWORDS_3_1_ONLY.iter().chain(&["else"]) {
        map.remove(*keyword);
    }
    nullable_type(map);
    nullable_alternatives(map);
    if let Some(Value::Array(examples)) = map.remove("examples") {
        if let Some(first) = examples.into_iter().next() {
            map.entry("example").or_insert(first);
        }
    }
    for (exclusive, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(limit) = map.get(exclusive).filter(|v| v.is_number()).cloned() {
            map.insert(bound.into(), limit);
            map.insert(exclusive.into(), json!(true));
        }
    }
    if let Some(constant) = map.remove("const") {
        map.insert("enum".into(), json!([constant]));
    }
    if map.contains_key("$ref") && map.len() > 1 {
        ref_with_siblings(map);
    }
    recurse(map);
}

/// `type: ["string", "null"]` becomes `type: string, nullable: true`.
fn nullable_type(map: &mut Map<String, Value>) {
    let Some(Value::Array(types)) = map.get("type").cloned() else {
        if map.get("type") == Some(&json!("null")) {
            map.remove("type");
            map.insert("nullable".into(), json!(true));
        }
        return;
    };
    let null = json!("null");
    let others: Vec<Value> = types.iter().filter(|t| **t != null).cloned().collect();
    if others.len() < types.len() {
        map.insert("nullable".into(), json!(true));
    }
    match others.as_slice() {
        [single] => {
            map.insert("type".into(), single.clone());
        }
        _ => {
            // 3.0 cannot say "one of several types" with `type`; say nothing.
            map.remove("type");
        }
    }
}

/// `oneOf: [{type: null}, X]` becomes X with `nullable: true`.
fn nullable_alternatives(map: &mut Map<String, Value>) {
    for combinator in ["oneOf", "anyOf"] {
        let Some(Value::Array(branches)) = map.get(combinator).cloned() else {
            continue;
        };
        let is_null = |branch: &Value| branch.get("type") == Some(&json!("null"));
        if !branches.iter().any(is_null) {
            continue;
        }
        let rest: Vec<Value> = branches
            .into_iter()
            .filter(|branch| !is_null(branch))
            .collect();
        map.remove(combinator);
        map.insert("nullable".into(), json!(true));
        match rest.as_slice() {
            [single] if single.get("$ref").is_some() => {
                map.insert("allOf".into(), json!([single]));
            }
            [Value::Object(single)] => {
                for (key, value) in single {
                    map.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
            _ => {
                map.insert(combinator.into(), Value::Array(rest));
            }
        }
    }
}

/// In 3.0 a `$ref` replaces its object; keep the siblings by wrapping the
/// reference in `allOf`.
fn ref_with_siblings(map: &mut Map<String, Value>) {
    if let Some(reference) = map.remove("$ref") {
        let mut all_of = vec![json!({"$ref": reference})];
        if let Some(Value::Array(existing)) = map.remove("allOf") {
            all_of.extend(existing);
        }
        map.insert("allOf".into(), Value::Array(all_of));
    }
}

fn recurse(map: &mut Map<String, Value>) {
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        properties.values_mut().for_each(downgrade_schema);
    }
    for key in ["items", "not", "additionalProperties"] {
        if let Some(child) = map.get_mut(key).filter(|child| child.is_object()) {
            downgrade_schema(child);
        }
    }
    for key in ["allOf", "oneOf", "anyOf"] {
        if let Some(Value::Array(branches)) = map.get_mut(key) {
            branches.iter_mut().for_each(downgrade_schema);
        }
    }
}

/// Every place a 3.1-only construct survives, for tests: array-valued
/// `type`, numeric exclusive bounds, schema `examples` arrays, `const`.
pub fn leftovers_3_1(value: &Value, path: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if map.get("type").is_some_and(Value::is_array)
                || map.get("type") == Some(&json!("null"))
            {
                found.push(format!("{path}/type"));
            }
            for key in ["exclusiveMinimum", "exclusiveMaximum"] {
                if map.get(key).is_some_and(Value::is_number) {
                    found.push(format!("{path}/{key}"));
                }
            }
            for (key, child) in map {
                leftovers_3_1(child, &format!("{path}/{key}"), found);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                leftovers_3_1(item, &format!("{path}/{index}"), found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nullable_types_and_refs() {
        let mut doc = json!({
            "openapi": "3.1.0",
            "info": {"title": "t", "version": "1", "license": {"name": "x", "identifier": "MIT"}},
            "paths": {"/a": {"get": {"parameters": [{"name": "q", "in": "query", "schema": {"type": ["integer", "null"], "exclusiveMinimum": 0}}],
                "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"}}}}}}}},
            "components": {"schemas": {"A": {"type": "object", "properties": {
                "name": {"type": ["string", "null"], "examples": ["x"]},
                "inner": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/B"}]},
                "list": {"type": "array", "items": {"type": ["string", "null"]}},
                "fixed": {"const": "tern"},
                "described": {"$ref": "#/components/schemas/B", "description": "why"}
            }}, "B": {"type": "object"}}}
        });
        doc = downgrade_to_3_0(doc);
        assert_eq!(doc["openapi"], "3.0.3");
        assert!(doc["info"]["license"].get("identifier").is_none());
        let props = &doc["components"]["schemas"]["A"]["properties"];
        assert_eq!(
            props["name"],
            json!({"type": "string", "nullable": true, "example": "x"})
        );
        assert_eq!(
            props["inner"],
            json!({"nullable": true, "allOf": [{"$ref": "#/components/schemas/B"}]})
        );
        assert_eq!(
            props["list"]["items"],
            json!({"type": "string", "nullable": true})
        );
        assert_eq!(props["fixed"], json!({"enum": ["tern"]}));
        assert_eq!(
            props["described"],
            json!({"description": "why", "allOf": [{"$ref": "#/components/schemas/B"}]})
        );
        let param = &doc["paths"]["/a"]["get"]["parameters"][0]["schema"];
        assert_eq!(
            param,
            &json!({"type": "integer", "nullable": true, "minimum": 0, "exclusiveMinimum": true})
        );
        let mut found = Vec::new();
        leftovers_3_1(&doc, "", &mut found);
        assert!(found.is_empty(), "{found:?}");
    }
}
