//! JSON Schema checks, written once: a tool's arguments against its
//! `inputSchema`, an elicitation's answer against its `requestedSchema`.
//! Schemas come from workers and tools, so no reference is ever fetched
//! (the crate is built without remote or file resolution), and formats
//! (`email`, `date`, …) are checked, not only annotated.

use serde_json::Value;

pub use jsonschema::Validator;

/// `schema` compiled, or why it cannot be.
pub fn compile(schema: &Value) -> Result<Validator, String> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|err| err.masked().to_string())
}

/// The first way `instance` breaks `validator`'s schema, as `root.field:
/// what is wrong` (the value itself never echoed), or `None`.
pub fn first_violation(validator: &Validator, instance: &Value, root: &str) -> Option<String> {
    let error = validator.iter_errors(instance).next()?;
    let path = error.instance_path().as_str().trim_start_matches('/');
    let at = if path.is_empty() {
        root.to_owned()
    } else {
        format!("{root}.{}", path.replace('/', "."))
    };
    Some(format!("{at}: {}", error.masked()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_violation_names_its_field_and_not_its_value() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "maximum": 3},
            "deep": {"type": "object", "properties": {"s": {"type": "string"}}}}});
        let validator = compile(&schema).expect("compiles");
        assert_eq!(
            first_violation(&validator, &json!({"n": 2}), "arguments"),
            None
        );
        let said = first_violation(&validator, &json!({"n": 9}), "arguments").expect("bad");
        assert!(said.starts_with("arguments.n: "), "{said}");
        let said = first_violation(
            &validator,
            &json!({"deep": {"s": "secret-99"}}),
            "arguments",
        );
        let said = said.unwrap_or_default();
        assert!(said.is_empty(), "a string is a string: {said}");
        let said = first_violation(&validator, &json!({"deep": {"s": 123456}}), "a").expect("bad");
        assert!(
            said.starts_with("a.deep.s: ") && !said.contains("123456"),
            "{said}"
        );
        assert!(
            first_violation(&validator, &json!([1]), "arguments")
                .is_some_and(|s| s.starts_with("arguments: "))
        );
    }

    #[test]
    fn references_are_never_fetched() {
        let remote = json!({"$ref": "https://example.invalid/schema.json"});
        assert!(compile(&remote).is_err());
    }
}
