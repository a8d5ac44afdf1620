//! What a question asks: an MCP input request (an elicitation, a sampling
//! request, the roots), parsed and bounded. Its answer is checked against
//! it in `answers.rs`; the question's life is `questions.rs`.

use serde_json::Value;

use super::json::{InvalidJson, JsonObject};

/// What an MCP input request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputMethod {
    /// `elicitation/create`: a form or a URL for a person.
    Elicitation,
    /// `sampling/createMessage`: a completion from the client's model.
    Sampling,
    /// `roots/list`: the client's roots.
    Roots,
}

impl InputMethod {
    pub const ALL: [InputMethod; 3] = [
        InputMethod::Elicitation,
        InputMethod::Sampling,
        InputMethod::Roots,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InputMethod::Elicitation => "elicitation/create",
            InputMethod::Sampling => "sampling/createMessage",
            InputMethod::Roots => "roots/list",
        }
    }
}

/// An input request as MCP writes it, `{"method": …, "params": {…}}`, kept
/// as the text the tool sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputRequest {
    method: InputMethod,
    /// What a person reads in the task's status message.
    summary: String,
    text: JsonObject,
}

impl InputRequest {
    /// Longest summary kept in a status message, in characters.
    const SUMMARY_CHARS: usize = 200;
    /// Largest request, in bytes: a form's schema fits many times over.
    pub const MAX_BYTES: usize = 64 * 1024;

    /// Parses `{"method", "params"}`: a method of [`InputMethod`], params an
    /// object (absent for `roots/list`); an elicitation needs a `message`.
    pub fn parse(text: impl Into<String>) -> Result<Self, InvalidJson> {
        let text = text.into();
        if text.len() > Self::MAX_BYTES {
            return Err(InvalidJson(format!(
                "is larger than {} bytes",
                Self::MAX_BYTES
            )));
        }
        let text = JsonObject::parse(text)?;
        let value: Value = serde_json::from_str(text.as_str())
            .map_err(|err| InvalidJson(format!("is not valid JSON: {err}")))?;
        let method_name = value.get("method").and_then(Value::as_str).ok_or_else(|| {
            InvalidJson(
                "needs a method: elicitation/create, sampling/createMessage or roots/list".into(),
            )
        })?;
        let method = InputMethod::ALL
            .into_iter()
            .find(|m| m.as_str() == method_name)
            .ok_or_else(|| {
                InvalidJson(format!(
                    "method {method_name:?} is not an input request (elicitation/create, sampling/createMessage or roots/list)"
                ))
            })?;
        if let Some(extra) = value.as_object().and_then(|o| {
            o.keys()
                .find(|k| !matches!(k.as_str(), "method" | "params"))
        }) {
            return Err(InvalidJson(format!(
                "has {extra:?}: an input request holds only method and params"
            )));
        }
        let params = value.get("params");
        if params.is_some_and(|p| !p.is_object()) {
            return Err(InvalidJson("params must be an object".into()));
        }
        let summary = match method {
            InputMethod::Elicitation => params
                .and_then(|p| p.get("message"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| InvalidJson("elicitation/create needs params.message".into()))?,
            InputMethod::Sampling => "asks for a completion from the client's model".to_owned(),
            InputMethod::Roots => "asks for the client's roots".to_owned(),
        };
        let summary = summary.chars().take(Self::SUMMARY_CHARS).collect();
        Ok(Self {
            method,
            summary,
            text,
        })
    }

    pub fn method(&self) -> InputMethod {
        self.method
    }

    /// What is asked, in a few words (an elicitation's message).
    pub fn summary(&self) -> &str {
        &self.summary
    }

    pub fn as_json(&self) -> &JsonObject {
        &self.text
    }

    /// Whether `other` asks the same: the same method and params, however
    /// the JSON was spaced or ordered.
    pub fn same_as(&self, other: &InputRequest) -> bool {
        let parse = |r: &InputRequest| serde_json::from_str::<Value>(r.text.as_str()).ok();
        self.method == other.method && parse(self) == parse(other)
    }
}
