//! Command tools: a tool implemented by any program, configured in a JSON
//! file (`--command-tools`). `docs/command-tools.md` is the author's guide;
//! this module holds the file's format (`CommandSpec`), `protocol.rs` the
//! line protocol between the program and the worker, and `run.rs` one run
//! of the program.

mod protocol;
mod run;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::tool::{ConcurrencyLimit, RateLimit, RetryPolicy, TaskSupport, Tool, ToolInfo};

pub use protocol::{Line, Message, PROTOCOL_VERSION, answer_line};

/// Most stdout kept as the result; more fails the call.
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// Longest stderr line forwarded as a progress message (longer ones are
/// cut).
pub const MAX_PROGRESS_BYTES: usize = 1024;
/// Longest protocol message line (a question carries a schema).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// The exit status that asks for a retry: `EX_TEMPFAIL` of sysexits.h.
pub const RETRY_EXIT_CODE: i32 = 75;

/// A tool and the name it is served under.
pub type NamedTool = (String, Arc<dyn Tool>);

/// The command tools file: `{"tools": {"name": {"command": [...], ...}}}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandToolsFile {
    pub tools: BTreeMap<String, CommandSpec>,
}

/// `command` as an array of strings; a single string (a shell line such as
/// `"python3 x.py"`) is refused with an example, since no shell splits it.
fn program_and_arguments<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<String>, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(text) => Ok(text),
                other => Err(serde::de::Error::custom(format!(
                    "command must be an array of strings (the program, then its arguments), not holding {other}"
                ))),
            })
            .collect(),
        Value::String(line) => {
            let example: Vec<&str> = line.split_whitespace().collect();
            Err(serde::de::Error::custom(format!(
                "command must be an array (the program, then its arguments; no shell runs it), e.g. {}",
                serde_json::to_string(&example).unwrap_or_default()
            )))
        }
        other => Err(serde::de::Error::custom(format!(
            "command must be an array of strings, e.g. [\"python3\", \"tool.py\"], not {other}"
        ))),
    }
}

/// One command tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// The program and its arguments (no shell). A program path with a
    /// `/` that is relative is resolved against the tools file's directory;
    /// a bare name is looked up in `PATH`.
    #[serde(deserialize_with = "program_and_arguments")]
    pub command: Vec<String>,
    /// The working directory; relative to the tools file's directory.
    /// Default: the worker's working directory.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Variables set for the program, on top of the worker's environment
    /// (whose `TASKWORKER_*` and `TASKSTORE_*` variables are removed: they
    /// may hold the worker's credentials).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// How long one attempt may run, e.g. `"10m"`; past it the program is
    /// stopped as on cancellation and the attempt fails retryably.
    #[serde(default)]
    pub timeout: Option<String>,
    /// Time between SIGTERM and SIGKILL on cancellation, e.g. `"5s"`.
    #[serde(default)]
    pub grace: Option<String>,
    /// Exit statuses that ask for a retry (default: 75, `EX_TEMPFAIL`).
    #[serde(default = "default_retry_exit_codes")]
    pub retry_exit_codes: Vec<i32>,
    /// Whether the program asks questions: stdin then stays open after the
    /// arguments line, and each answer arrives there as a line.
    #[serde(default)]
    pub interactive: bool,
    /// What MCP clients are told about it (all optional).
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// The JSON Schema of its arguments (an object).
    #[serde(default)]
    pub input_schema: Option<Value>,
    /// `optional` (the default), `required` or `forbidden`.
    #[serde(default)]
    pub task_support: TaskSupport,
    /// How its tasks are retried (all optional; the service's otherwise).
    #[serde(default)]
    pub retry: Option<RetrySpec>,
    /// At most how many of its tasks run at once per key
    /// (`{"max": 3, "key": "tenant, arguments.customer_id"}`).
    #[serde(default)]
    pub concurrency: Option<ConcurrencyLimit>,
    /// At most how many of its tasks start per window per key
    /// (`{"starts": 20, "per": "1s", "key": "tenant"}`).
    #[serde(default)]
    pub rate: Option<RateSpec>,
    /// Within a tenant, the key whose values take turns when its tasks
    /// wait for room (`"arguments.customer_id"`).
    #[serde(default)]
    pub fairness_key: Option<String>,
}

/// A command tool's rate of starts, as the tools file writes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateSpec {
    pub starts: u32,
    /// The window, e.g. `"1s"`, `"1m"`.
    pub per: String,
    #[serde(default)]
    pub key: String,
}

impl RateSpec {
    fn limit(self) -> Result<RateLimit, String> {
        Ok(RateLimit {
            starts: self.starts,
            per: duration("rate.per", &self.per)?,
            key: self.key,
        })
    }
}

/// A command tool's retry policy, as the tools file writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// Attempts a task gets when its caller asks for no number.
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// The first retry's backoff ceiling, e.g. `"2s"`; doubles per attempt.
    #[serde(default)]
    pub backoff_base: Option<String>,
    /// The longest backoff, e.g. `"5m"`.
    #[serde(default)]
    pub backoff_max: Option<String>,
    /// `false`: a retry exit code or a timeout fails the task at once.
    #[serde(default)]
    pub retry_errors: Option<bool>,
    /// `false`: a task whose worker was lost mid-run fails rather than
    /// running the program again.
    #[serde(default)]
    pub retry_lost_workers: Option<bool>,
}

impl RetrySpec {
    fn policy(self) -> Result<RetryPolicy, String> {
        let backoff = |field, raw: Option<String>| {
            raw.map(|raw| duration(&format!("retry.{field}"), &raw))
                .transpose()
        };
        Ok(RetryPolicy {
            max_attempts: self.max_attempts,
            backoff_base: backoff("backoff_base", self.backoff_base)?,
            backoff_max: backoff("backoff_max", self.backoff_max)?,
            retry_errors: self.retry_errors.unwrap_or(true),
            retry_lost_workers: self.retry_lost_workers.unwrap_or(true),
        })
    }
}

fn default_retry_exit_codes() -> Vec<i32> {
    vec![RETRY_EXIT_CODE]
}

impl CommandToolsFile {
    pub fn load(path: &Path) -> Result<Self, String> {
        let text =
            std::fs::read_to_string(path).map_err(|err| format!("{}: {err}", path.display()))?;
        serde_json::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))
    }

    /// The tools, ready to register; relative paths are resolved against
    /// `base` (the tools file's directory).
    pub fn into_tools(self, base: &Path) -> Result<Vec<NamedTool>, String> {
        self.tools
            .into_iter()
            .map(|(name, spec)| {
                let tool =
                    CommandTool::new(spec, base).map_err(|err| format!("tool {name}: {err}"))?;
                Ok((name, Arc::new(tool) as Arc<dyn Tool>))
            })
            .collect()
    }
}

/// A tool that runs a program.
#[derive(Debug, Clone)]
pub struct CommandTool {
    program: PathBuf,
    args: Vec<String>,
    cwd: Option<PathBuf>,
    env: BTreeMap<String, String>,
    timeout: Option<Duration>,
    grace: Duration,
    retry_exit_codes: Vec<i32>,
    interactive: bool,
    info: ToolInfo,
}

impl CommandTool {
    /// The tool `spec` describes; relative paths resolve against `base`.
    pub fn new(spec: CommandSpec, base: &Path) -> Result<Self, String> {
        if spec
            .input_schema
            .as_ref()
            .is_some_and(|schema| !schema.is_object())
        {
            return Err("input_schema must be a JSON object".to_owned());
        }
        if let Some(name) = spec.env.keys().find(|name| !is_variable_name(name)) {
            return Err(format!(
                "env: {name:?} is not a variable name (letters, digits and _, not starting with a digit)"
            ));
        }
        let info = ToolInfo {
            title: spec.title,
            description: spec.description,
            input_schema: spec.input_schema,
            task_support: spec.task_support,
            retry: spec.retry.map(RetrySpec::policy).transpose()?,
            concurrency: spec.concurrency,
            rate: spec.rate.map(RateSpec::limit).transpose()?,
            fairness_key: spec.fairness_key,
        };
        let mut command = spec.command.into_iter();
        let program = command.next().ok_or("command must name a program")?;
        let program = PathBuf::from(program);
        // `python3` is looked up in PATH; `./tool.py` or `bin/tool` is a
        // file beside the tools file, wherever the worker was started.
        let program = if program.is_relative() && program.components().count() > 1 {
            base.join(program)
        } else {
            program
        };
        Ok(Self {
            program,
            args: command.collect(),
            cwd: spec.cwd.map(|cwd| base.join(cwd)),
            env: spec.env,
            timeout: spec.timeout.map(|t| duration("timeout", &t)).transpose()?,
            grace: spec
                .grace
                .map(|g| duration("grace", &g))
                .transpose()?
                .unwrap_or(Duration::from_secs(5)),
            retry_exit_codes: spec.retry_exit_codes,
            interactive: spec.interactive,
            info,
        })
    }
}

fn duration(field: &str, raw: &str) -> Result<Duration, String> {
    humantime::parse_duration(raw).map_err(|err| format!("{field}: {err}"))
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: Value) -> Result<CommandTool, String> {
        let spec: CommandSpec = serde_json::from_value(json).map_err(|e| e.to_string())?;
        CommandTool::new(spec, Path::new("/srv/tools"))
    }

    #[test]
    fn a_command_given_as_one_line_is_refused_with_an_array_to_use() {
        let refused = spec(serde_json::json!({"command": "python3 x.py"})).expect_err("refused");
        assert!(
            refused.contains("must be an array") && refused.contains(r#"["python3","x.py"]"#),
            "{refused}"
        );
        let mixed = spec(serde_json::json!({"command": ["python3", 7]})).expect_err("refused");
        assert!(mixed.contains("array of strings"), "{mixed}");
    }

    #[test]
    fn a_fairness_key_goes_with_the_description() {
        let tool = spec(serde_json::json!({
            "command": ["python3"],
            "fairness_key": "arguments.customer_id",
        }))
        .expect("valid");
        assert_eq!(
            crate::heartbeat::description("t", &tool.info).fairness_key,
            "arguments.customer_id"
        );
        let plain = spec(serde_json::json!({"command": ["python3"]})).expect("valid");
        assert_eq!(
            crate::heartbeat::description("t", &plain.info).fairness_key,
            ""
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_tools_file() {
        let tool =
            spec(serde_json::json!({"command": ["./run.py", "a"], "cwd": "work"})).expect("valid");
        assert_eq!(tool.program, PathBuf::from("/srv/tools/./run.py"));
        assert_eq!(tool.cwd, Some(PathBuf::from("/srv/tools/work")));
        let bare = spec(serde_json::json!({"command": ["python3"]})).expect("valid");
        assert_eq!(bare.program, PathBuf::from("python3"), "looked up in PATH");
        let absolute =
            spec(serde_json::json!({"command": ["/bin/sh"], "cwd": "/tmp"})).expect("valid");
        assert_eq!(absolute.program, PathBuf::from("/bin/sh"));
        assert_eq!(absolute.cwd, Some(PathBuf::from("/tmp")));
    }

    #[test]
    fn bad_specs_are_refused_with_the_field_named() {
        for (json, says) in [
            (
                serde_json::json!({"command": []}),
                "command must name a program",
            ),
            (
                serde_json::json!({"command": ["x"], "timeout": "soon"}),
                "timeout:",
            ),
            (
                serde_json::json!({"command": ["x"], "grace": "-1s"}),
                "grace:",
            ),
            (
                serde_json::json!({"command": ["x"], "env": {"A=B": "1"}}),
                "env:",
            ),
            (
                serde_json::json!({"command": ["x"], "input_schema": []}),
                "input_schema",
            ),
            (
                serde_json::json!({"command": ["x"], "shell": true}),
                "unknown field",
            ),
        ] {
            let err = spec(json.clone()).expect_err("refused");
            assert!(err.contains(says), "{json}: {err}");
        }
        let tool = spec(serde_json::json!({"command": ["x"]})).expect("valid");
        assert_eq!(tool.retry_exit_codes, vec![RETRY_EXIT_CODE]);
        assert_eq!(tool.timeout, None);
    }
}
