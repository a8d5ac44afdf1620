//! What a tool is to an MCP client (name, schema, whether it runs as a
//! task), as workers describe the tools they serve, and the decision a
//! `tools/call` asks: run it as a task, synchronously, or not at all.

use std::fmt;

use super::execution::{ConcurrencyLimit, KeyExpr, RateLimit, RetryPolicy, ToolName};
use super::json::{InvalidJson, JsonObject};

/// MCP `execution.taskSupport`: how a tool may be called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TaskSupport {
    /// As a task or synchronously, as the client chooses.
    #[default]
    Optional,
    /// Only as a task.
    Required,
    /// Only synchronously.
    Forbidden,
}

impl TaskSupport {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
            TaskSupport::Forbidden => "forbidden",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [
            TaskSupport::Optional,
            TaskSupport::Required,
            TaskSupport::Forbidden,
        ]
        .into_iter()
        .find(|support| support.as_str() == raw)
    }
}

impl fmt::Display for TaskSupport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A tool as `tools/list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDescription {
    pub name: ToolName,
    pub title: Option<String>,
    pub description: Option<String>,
    /// A JSON Schema object for the arguments.
    pub input_schema: JsonObject,
    pub task_support: TaskSupport,
    /// How its tasks are retried (the service's policy by default).
    pub retry: RetryPolicy,
    /// How many of its tasks may run at once per key (`None`: no limit).
    pub concurrency: Option<ConcurrencyLimit>,
    /// How many of its tasks may start per window per key (`None`: no
    /// limit).
    pub rate: Option<RateLimit>,
    /// Within a tenant, the key whose values take turns when its tasks
    /// wait for room (`None`: first in, first out).
    pub fairness: Option<KeyExpr>,
}

/// Why a worker's description of a tool was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {reason}")]
pub struct InvalidDescription {
    pub field: &'static str,
    pub reason: String,
}

impl ToolDescription {
    /// Longest title, in bytes.
    pub const MAX_TITLE_BYTES: usize = 256;
    /// Longest description, in bytes.
    pub const MAX_DESCRIPTION_BYTES: usize = 8 * 1024;
    /// Largest input schema, in bytes: every worker reports it every few
    /// seconds.
    pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

    /// A tool its workers did not describe: any arguments, task optional.
    pub fn undescribed(name: ToolName) -> Self {
        Self {
            name,
            title: None,
            description: None,
            input_schema: JsonObject::open_object_schema(),
            task_support: TaskSupport::Optional,
            retry: RetryPolicy::default(),
            concurrency: None,
            rate: None,
            fairness: None,
        }
    }

    /// With the retry policy its workers declare (checked by
    /// `RetryPolicy::parse`).
    pub fn with_retry(self, retry: RetryPolicy) -> Self {
        Self { retry, ..self }
    }

    /// Gives `dispatch` what this tool declares for its tasks (retry
    /// policy, concurrency limit, rate): every edge calls this with the
    /// tool it serves.
    pub fn apply_to(&self, dispatch: &mut super::execution::DispatchRequest) {
        dispatch.retry = self.retry.clone();
        dispatch.concurrency = self.concurrency.clone();
        dispatch.rate = self.rate.clone();
        dispatch.fairness = self.fairness.clone();
    }

    /// With the fairness key its workers declare (an expression of no
    /// terms is none: one key is first in, first out).
    pub fn with_fairness(self, fairness: Option<KeyExpr>) -> Self {
        Self {
            fairness: fairness.filter(|key| !key.is_whole_tool()),
            ..self
        }
    }

    /// With the rate of starts its workers declare.
    pub fn with_rate(self, rate: Option<RateLimit>) -> Self {
        Self { rate, ..self }
    }

    /// With the concurrency limit its workers declare.
    pub fn with_concurrency(self, concurrency: Option<ConcurrencyLimit>) -> Self {
        Self {
            concurrency,
            ..self
        }
    }

    /// A few words of it and a fingerprint of the whole (title, text,
    /// schema, task support, retry policy), to tell two descriptions apart
    /// at a glance.
    pub fn summary(&self) -> String {
        use sha2::Digest as _;
        let mut whole = format!(
            "{:?}\u{0}{:?}\u{0}{}\u{0}{}",
            self.title,
            self.description,
            self.input_schema.as_str(),
            self.task_support.as_str()
        );
        // Only a declared policy counts, so that descriptions from before
        // policies keep their fingerprints.
        if let Some(retry) = self.retry.to_stored() {
            whole.push('\u{0}');
            whole.push_str(&retry);
        }
        if let Some(limit) = &self.concurrency {
            whole.push_str(&format!("\u{0}{}\u{0}{}", limit.max, limit.key.source()));
        }
        if let Some(rate) = &self.rate {
            whole.push_str(&format!(
                "\u{0}{}/{:?}\u{0}{}",
                rate.starts,
                rate.per,
                rate.key.source()
            ));
        }
        if let Some(key) = &self.fairness {
            whole.push_str(&format!("\u{0}fair\u{0}{}", key.source()));
        }
        let digest = sha2::Sha256::digest(whole.as_bytes());
        let fingerprint: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
        let words: String = self
            .description
            .as_deref()
            .or(self.title.as_deref())
            .unwrap_or("no description")
            .chars()
            .take(60)
            .collect();
        format!("{words} (schema {fingerprint})")
    }

    /// Checks a description's parts; empty strings mean "not given".
    pub fn parse(
        name: ToolName,
        title: &str,
        description: &str,
        input_schema: &str,
        task_support: TaskSupport,
    ) -> Result<Self, InvalidDescription> {
        let refuse = |field, reason: String| InvalidDescription { field, reason };
        if title.len() > Self::MAX_TITLE_BYTES {
            return Err(refuse(
                "title",
                format!("must be at most {} bytes", Self::MAX_TITLE_BYTES),
            ));
        }
        if description.len() > Self::MAX_DESCRIPTION_BYTES {
            return Err(refuse(
                "description",
                format!("must be at most {} bytes", Self::MAX_DESCRIPTION_BYTES),
            ));
        }
        if input_schema.len() > Self::MAX_SCHEMA_BYTES {
            return Err(refuse(
                "input_schema_json",
                format!("must be at most {} bytes", Self::MAX_SCHEMA_BYTES),
            ));
        }
        // PostgreSQL's jsonb cannot hold NUL: refused here, not at every
        // heartbeat's write.
        for (field, text) in [
            ("title", title),
            ("description", description),
            ("input_schema_json", input_schema),
        ] {
            if text.contains('\0') || text.contains("\\u0000") {
                return Err(refuse(field, "must not contain NUL".to_owned()));
            }
        }
        let input_schema = if input_schema.trim().is_empty() {
            JsonObject::open_object_schema()
        } else {
            JsonObject::parse(input_schema)
                .map_err(|InvalidJson(reason)| refuse("input_schema_json", reason))?
        };
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Ok(Self {
            rate: None,
            concurrency: None,
            fairness: None,
            name,
            title: non_empty(title),
            description: non_empty(description),
            input_schema,
            task_support,
            retry: RetryPolicy::default(),
        })
    }
}

/// How a `tools/call` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallMode {
    /// A task: the call answers at once with the task.
    Task,
    /// Through a task all the same (durable, retried), but the call waits
    /// for its result and answers with it.
    Synchronous,
}

/// A `tools/call` its tool does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CallModeRefusal {
    #[error("the tool must be called as a task (its taskSupport is required)")]
    TaskRequired,
    #[error("the tool cannot be called as a task (its taskSupport is forbidden)")]
    TaskForbidden,
}

/// Whether a call that did (or did not) ask for a task may run, and how.
pub fn call_mode(support: TaskSupport, task_requested: bool) -> Result<CallMode, CallModeRefusal> {
    match (support, task_requested) {
        (TaskSupport::Forbidden, true) => Err(CallModeRefusal::TaskForbidden),
        (TaskSupport::Required, false) => Err(CallModeRefusal::TaskRequired),
        (_, true) => Ok(CallMode::Task),
        (_, false) => Ok(CallMode::Synchronous),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> ToolName {
        ToolName::parse("echo").expect("name")
    }

    #[test]
    fn call_modes_follow_task_support() {
        use CallMode::*;
        use TaskSupport::*;
        assert_eq!(call_mode(Optional, true), Ok(Task));
        assert_eq!(call_mode(Optional, false), Ok(Synchronous));
        assert_eq!(call_mode(Required, true), Ok(Task));
        assert!(call_mode(Required, false).is_err());
        assert_eq!(call_mode(Forbidden, false), Ok(Synchronous));
        assert!(call_mode(Forbidden, true).is_err());
    }

    #[test]
    fn descriptions_are_checked() {
        let ok = ToolDescription::parse(name(), "", "says it back", "", TaskSupport::Required)
            .expect("valid");
        assert_eq!(ok.title, None);
        assert_eq!(ok.description.as_deref(), Some("says it back"));
        assert_eq!(ok.input_schema.as_str(), r#"{"type":"object"}"#);
        for (title, description, schema) in [
            ("x".repeat(257), String::new(), String::new()),
            (String::new(), "x".repeat(8 * 1024 + 1), String::new()),
            (String::new(), String::new(), "[1]".to_owned()),
            (String::new(), String::new(), "{".to_owned()),
            ("a\0b".to_owned(), String::new(), String::new()),
            (String::new(), String::new(), r#"{"d":"\u0000"}"#.to_owned()),
            (
                String::new(),
                String::new(),
                format!(r#"{{"d":"{}"}}"#, "x".repeat(64 * 1024)),
            ),
        ] {
            assert!(
                ToolDescription::parse(
                    name(),
                    &title,
                    &description,
                    &schema,
                    TaskSupport::Optional
                )
                .is_err(),
                "{title:.10} {description:.10} {schema:.10}"
            );
        }
    }

    #[test]
    fn task_support_names_round_trip() {
        for support in [
            TaskSupport::Optional,
            TaskSupport::Required,
            TaskSupport::Forbidden,
        ] {
            assert_eq!(TaskSupport::parse(support.as_str()), Some(support));
        }
        assert_eq!(TaskSupport::parse("sometimes"), None);
    }
}
