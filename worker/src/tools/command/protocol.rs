//! The line protocol between a command tool and its worker (version 1,
//! told to the program in `TASKSTORE_PROTOCOL`):
//!
//! - stdin: the call's arguments, one JSON object on one line; then, for a
//!   tool declared `"interactive": true`, the answers to its questions,
//!   one line each, `{"taskstore":"answer","key":…,"answer":{…}}` (or
//!   `"error"` instead of `"answer"`), until the program exits;
//! - stdout: the result (a `CallToolResult` object, or any text);
//! - stderr: lines. A line that is a JSON object with a string member
//!   `"taskstore"` is a message to the worker (below); any other line is
//!   free text, shown as the task's progress.
//!
//! Messages: `{"taskstore":"progress","message":"…","progress":3,"total":10}`
//! (every field but `taskstore` optional), and
//! `{"taskstore":"ask","key":"…","request":{"method":…,"params":{…}}}`
//! (an MCP input request; its answer comes on stdin), and
//! `{"taskstore":"back_off","after":"30s"}` or `{…,"until":"<RFC 3339>"}`
//! (what it calls told it to wait: when the program then exits with a
//! failure, the attempt is given back until then, and its key waits too).
//! A message of a type this
//! worker does not know is logged and skipped, so that tools written for a
//! newer worker still run; a known type with wrong fields fails the call.

use serde::Deserialize;
use serde_json::Value;

/// The version of this protocol.
pub const PROTOCOL_VERSION: u32 = 1;

/// What one stderr line says.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// Free text.
    Text(String),
    /// A message to the worker.
    Message(Message),
    /// A message of a type this worker does not know.
    Unknown(String),
    /// A message of a known type whose fields are wrong.
    Malformed(String),
}

/// A message from the program.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// How far it got: a message and/or numbers (`progress` of `total`).
    Progress {
        message: Option<String>,
        progress: Option<f64>,
        total: Option<f64>,
    },
    /// A question for the task's caller, under a key of the tool's.
    Ask { key: String, request: Value },
    /// Told to wait until then.
    BackOff { until: std::time::SystemTime },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BackOffFields {
    #[serde(rename = "taskstore")]
    _kind: String,
    after: Option<String>,
    until: Option<String>,
}

impl BackOffFields {
    fn until(self) -> Result<std::time::SystemTime, String> {
        match (self.after, self.until) {
            (Some(after), None) => humantime::parse_duration(&after)
                .map(|after| std::time::SystemTime::now() + after)
                .map_err(|err| format!("back_off: after {after:?}: {err}")),
            (None, Some(until)) => humantime::parse_rfc3339_weak(&until)
                .map_err(|err| format!("back_off: until {until:?}: {err}")),
            _ => Err("back_off: give one of after (\"30s\") and until (RFC 3339)".into()),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskFields {
    #[serde(rename = "taskstore")]
    _kind: String,
    key: String,
    request: serde_json::Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgressFields {
    #[serde(rename = "taskstore")]
    _kind: String,
    message: Option<String>,
    progress: Option<f64>,
    total: Option<f64>,
}

impl Line {
    /// Reads one stderr line (without its newline).
    pub fn parse(line: &str) -> Line {
        let trimmed = line.trim();
        if !trimmed.starts_with('{') {
            return Line::Text(line.to_owned());
        }
        let Ok(Value::Object(object)) = serde_json::from_str::<Value>(trimmed) else {
            return Line::Text(line.to_owned());
        };
        let Some(Value::String(kind)) = object.get("taskstore") else {
            // Someone's JSON log line: text like any other.
            return Line::Text(line.to_owned());
        };
        match kind.as_str() {
            "progress" => match serde_json::from_value::<ProgressFields>(Value::Object(object)) {
                Ok(fields)
                    if fields.progress.is_some_and(|p| !p.is_finite())
                        || fields.total.is_some_and(|t| !t.is_finite() || t <= 0.0) =>
                {
                    Line::Malformed(
                        "progress: progress and total must be numbers, total above 0".into(),
                    )
                }
                Ok(fields) => Line::Message(Message::Progress {
                    message: fields.message,
                    progress: fields.progress,
                    total: fields.total,
                }),
                Err(err) => Line::Malformed(format!("progress: {err}")),
            },
            "ask" => match serde_json::from_value::<AskFields>(Value::Object(object)) {
                Ok(fields) => Line::Message(Message::Ask {
                    key: fields.key,
                    request: Value::Object(fields.request),
                }),
                Err(err) => Line::Malformed(format!("ask: {err}")),
            },
            "back_off" => match serde_json::from_value::<BackOffFields>(Value::Object(object))
                .map_err(|err| format!("back_off: {err}"))
                .and_then(BackOffFields::until)
            {
                Ok(until) => Line::Message(Message::BackOff { until }),
                Err(why) => Line::Malformed(why),
            },
            other => Line::Unknown(other.to_owned()),
        }
    }
}

impl Message {
    /// The task's status message for a progress message: its text, with
    /// its numbers after it (`copying (3/10)`).
    pub fn status_message(&self) -> Option<String> {
        let Message::Progress {
            message,
            progress,
            total,
        } = self
        else {
            return None;
        };
        let numbers = match (progress, total) {
            (Some(progress), Some(total)) => {
                Some(format!("{}/{}", number(*progress), number(*total)))
            }
            (Some(progress), None) => Some(number(*progress)),
            (None, _) => None,
        };
        match (
            message.as_deref().map(str::trim).filter(|m| !m.is_empty()),
            numbers,
        ) {
            (Some(message), Some(numbers)) => Some(format!("{message} ({numbers})")),
            (Some(message), None) => Some(message.to_owned()),
            (None, numbers) => numbers,
        }
    }
}

/// `3` rather than `3.0`; fractions as they are.
fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

/// The line that gives a question's answer (or why there is none) to the
/// program, on its stdin.
pub fn answer_line(key: &str, answer: Result<&Value, &str>) -> String {
    let line = match answer {
        Ok(answer) => serde_json::json!({"taskstore": "answer", "key": key, "answer": answer}),
        Err(error) => serde_json::json!({"taskstore": "answer", "key": key, "error": error}),
    };
    format!("{line}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(message: Option<&str>, progress: Option<f64>, total: Option<f64>) -> Line {
        Line::Message(Message::Progress {
            message: message.map(str::to_owned),
            progress,
            total,
        })
    }

    #[test]
    fn a_back_off_names_a_delay_or_a_time() {
        let soon = std::time::SystemTime::now() + std::time::Duration::from_secs(30);
        match Line::parse(r#"{"taskstore":"back_off","after":"30s"}"#) {
            Line::Message(Message::BackOff { until }) => {
                let off = until
                    .duration_since(soon)
                    .or_else(|err| Ok::<_, ()>(err.duration()))
                    .unwrap_or_default();
                assert!(off < std::time::Duration::from_secs(2), "{until:?}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            Line::parse(r#"{"taskstore":"back_off","until":"2030-01-01T00:00:00Z"}"#),
            Line::Message(Message::BackOff {
                until: humantime::parse_rfc3339("2030-01-01T00:00:00Z").expect("time")
            })
        );
        for bad in [
            r#"{"taskstore":"back_off"}"#,
            r#"{"taskstore":"back_off","after":"soon"}"#,
            r#"{"taskstore":"back_off","until":"tomorrow"}"#,
            r#"{"taskstore":"back_off","after":"1s","until":"2030-01-01T00:00:00Z"}"#,
            r#"{"taskstore":"back_off","after":"1s","why":"x"}"#,
        ] {
            assert!(matches!(Line::parse(bad), Line::Malformed(_)), "{bad}");
        }
    }

    #[test]
    fn lines_are_text_unless_they_are_messages() {
        assert_eq!(Line::parse("copying"), Line::Text("copying".into()));
        assert_eq!(Line::parse("{not json"), Line::Text("{not json".into()));
        let log = r#"{"level":"info","msg":"hi"}"#;
        assert_eq!(Line::parse(log), Line::Text(log.into()), "a JSON log line");
        assert_eq!(
            Line::parse(r#"{"taskstore":"progress","message":"copying","progress":3,"total":10}"#),
            progress(Some("copying"), Some(3.0), Some(10.0))
        );
        assert_eq!(
            Line::parse(r#"  {"taskstore":"progress","progress":0.5}"#),
            progress(None, Some(0.5), None)
        );
        assert_eq!(
            Line::parse(r#"{"taskstore":"later","x":1}"#),
            Line::Unknown("later".into())
        );
        assert_eq!(
            Line::parse(r#"{"taskstore":"ask","key":"ok","request":{"method":"roots/list"}}"#),
            Line::Message(Message::Ask {
                key: "ok".into(),
                request: serde_json::json!({"method": "roots/list"})
            })
        );
        assert_eq!(
            answer_line("ok", Ok(&serde_json::json!({"roots": []}))),
            "{\"answer\":{\"roots\":[]},\"key\":\"ok\",\"taskstore\":\"answer\"}\n"
        );
        for bad in [
            r#"{"taskstore":"ask","key":"k"}"#,
            r#"{"taskstore":"ask","key":7,"request":{}}"#,
            r#"{"taskstore":"progress","progress":"3"}"#,
            r#"{"taskstore":"progress","total":0}"#,
            r#"{"taskstore":"progress","percent":3}"#,
        ] {
            assert!(matches!(Line::parse(bad), Line::Malformed(_)), "{bad}");
        }
    }

    #[test]
    fn progress_reads_as_a_status_message() {
        let message = |line: &str| match Line::parse(line) {
            Line::Message(message) => message.status_message(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            message(r#"{"taskstore":"progress","message":"copying","progress":3,"total":10}"#),
            Some("copying (3/10)".into())
        );
        assert_eq!(
            message(r#"{"taskstore":"progress","progress":2.5}"#),
            Some("2.5".into())
        );
        assert_eq!(
            message(r#"{"taskstore":"progress","message":"only words"}"#),
            Some("only words".into())
        );
        assert_eq!(message(r#"{"taskstore":"progress"}"#), None);
    }
}
