//! Flag values parsed into what they name: task ids, tool names, and JSON
//! given inline, read from a file (`@path`) or from standard input (`-`),
//! because the operating system caps one argument at 128 KiB, far below the
//! 1 MiB a request or result may have.

use std::io::Read;

use super::exit::ClientError;
use crate::domain::{TaskId, ToolName};

/// Where a flag's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source<'a> {
    Inline(&'a str),
    File(&'a str),
    Stdin,
}

fn source(raw: &str) -> Source<'_> {
    match raw {
        "-" => Source::Stdin,
        _ => match raw.strip_prefix('@') {
            Some(path) => Source::File(path),
            None => Source::Inline(raw),
        },
    }
}

/// Reads flag values, allowing standard input to be read once.
#[derive(Debug, Default)]
pub(super) struct Inputs {
    stdin_taken_by: Option<&'static str>,
}

impl Inputs {
    /// The text of `flag`'s value, checked to be JSON; `example` shows what
    /// a valid one looks like.
    pub(super) fn json(
        &mut self,
        flag: &'static str,
        raw: &str,
        example: &str,
    ) -> Result<String, ClientError> {
        let text = match source(raw) {
            Source::Inline(text) => text.to_owned(),
            Source::File(path) => std::fs::read_to_string(path).map_err(|err| {
                ClientError::Usage(format!("cannot read {flag} from {path}: {err}"))
            })?,
            Source::Stdin => {
                if let Some(other) = self.stdin_taken_by.replace(flag) {
                    return Err(ClientError::Usage(format!(
                        "{other} and {flag} cannot both read standard input"
                    )));
                }
                let mut text = String::new();
                std::io::stdin().read_to_string(&mut text).map_err(|err| {
                    ClientError::Usage(format!("cannot read {flag} from standard input: {err}"))
                })?;
                text
            }
        };
        serde_json::from_str::<serde::de::IgnoredAny>(&text).map_err(|err| {
            ClientError::Usage(format!(
                "{flag} must be JSON ({err}), e.g. {flag} '{example}', or @FILE, or - for standard input"
            ))
        })?;
        Ok(text)
    }
}

/// A task id given on the command line.
pub(super) fn task_id_arg(raw: &str) -> Result<TaskId, ClientError> {
    TaskId::parse(raw).map_err(|err| ClientError::Usage(format!("task id {raw:?} {err}")))
}

/// A tool name given on the command line.
pub(super) fn tool_arg(raw: &str) -> Result<ToolName, ClientError> {
    ToolName::parse(raw).map_err(|err| ClientError::Usage(format!("tool {raw:?} {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_inline_or_from_files() {
        let mut inputs = Inputs::default();
        assert_eq!(
            inputs.json("--arguments", r#"{"a":1}"#, "{}").ok(),
            Some(r#"{"a":1}"#.to_owned())
        );
        let file =
            std::env::temp_dir().join(format!("taskstore-input-{}.json", std::process::id()));
        std::fs::write(&file, r#"{"from":"file"}"#).expect("write");
        let raw = format!("@{}", file.display());
        assert_eq!(
            inputs.json("--arguments", &raw, "{}").ok(),
            Some(r#"{"from":"file"}"#.to_owned())
        );
        std::fs::remove_file(&file).expect("remove");
        let missing = inputs.json("--arguments", &raw, "{}").expect_err("gone");
        assert!(
            missing
                .to_string()
                .starts_with("cannot read --arguments from"),
            "{missing}"
        );
    }

    #[test]
    fn malformed_json_says_what_to_write() {
        let err = Inputs::default()
            .json("--arguments", "{text:hi}", r#"{"text":"hi"}"#)
            .expect_err("not JSON")
            .to_string();
        assert!(err.starts_with("--arguments must be JSON"), "{err}");
        assert!(err.contains(r#"e.g. --arguments '{"text":"hi"}'"#), "{err}");
    }

    #[test]
    fn sources() {
        assert_eq!(source("-"), Source::Stdin);
        assert_eq!(source("@a.json"), Source::File("a.json"));
        assert_eq!(source("{}"), Source::Inline("{}"));
    }
}
