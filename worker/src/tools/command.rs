//! Command tools: a tool implemented by any program. The call's arguments
//! go to its stdin as JSON; its stdout is the result (a `CallToolResult`
//! JSON object, or plain text wrapped as text content); each stderr line
//! becomes a progress message; a non-zero exit is a FAILED result with
//! `isError: true`. Cancellation sends SIGTERM, then SIGKILL after a grace
//! period.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use crate::tool::{TaskSupport, Tool, ToolContext, ToolError, ToolInfo, error_result, text_result};

/// Most stdout kept as the result.
const MAX_OUTPUT_BYTES: u64 = 1024 * 1024;
/// Longest stderr line forwarded as a progress message.
const MAX_PROGRESS_BYTES: usize = 1024;

/// A tool and the name it is served under.
pub type NamedTool = (String, Arc<dyn Tool>);

/// The command tools file: `{"tools": {"name": {"command": [...], ...}}}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandToolsFile {
    pub tools: BTreeMap<String, CommandSpec>,
}

/// One command tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// The program and its arguments (no shell).
    pub command: Vec<String>,
    /// Time between SIGTERM and SIGKILL on cancellation, e.g. `"5s"`.
    #[serde(default)]
    pub grace: Option<String>,
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
}

impl CommandToolsFile {
    pub fn load(path: &Path) -> Result<Self, String> {
        let text =
            std::fs::read_to_string(path).map_err(|err| format!("{}: {err}", path.display()))?;
        serde_json::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))
    }

    /// The tools, ready to register.
    pub fn into_tools(self) -> Result<Vec<NamedTool>, String> {
        self.tools
            .into_iter()
            .map(|(name, spec)| {
                let tool = CommandTool::new(spec).map_err(|err| format!("tool {name}: {err}"))?;
                Ok((name, Arc::new(tool) as Arc<dyn Tool>))
            })
            .collect()
    }
}

/// A tool that runs a program.
#[derive(Debug, Clone)]
pub struct CommandTool {
    program: String,
    args: Vec<String>,
    grace: Duration,
    info: ToolInfo,
}

impl CommandTool {
    pub fn new(spec: CommandSpec) -> Result<Self, String> {
        if spec
            .input_schema
            .as_ref()
            .is_some_and(|schema| !schema.is_object())
        {
            return Err("input_schema must be a JSON object".to_owned());
        }
        let info = ToolInfo {
            title: spec.title,
            description: spec.description,
            input_schema: spec.input_schema,
            task_support: spec.task_support,
        };
        let mut command = spec.command.into_iter();
        let program = command.next().ok_or("command must name a program")?;
        let grace = match spec.grace {
            Some(grace) => {
                humantime::parse_duration(&grace).map_err(|err| format!("grace: {err}"))?
            }
            None => Duration::from_secs(5),
        };
        Ok(Self {
            program,
            args: command.collect(),
            grace,
            info,
        })
    }

    /// SIGTERM, then SIGKILL if it is still running after the grace period.
    async fn terminate(&self, child: &mut Child) {
        if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            if tokio::time::timeout(self.grace, child.wait()).await.is_ok() {
                return;
            }
        }
        let _ = child.kill().await;
    }
}

#[async_trait]
impl Tool for CommandTool {
    fn describe(&self) -> ToolInfo {
        self.info.clone()
    }

    async fn call(&self, ctx: ToolContext, arguments: Value) -> Result<Value, ToolError> {
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| ToolError::Permanent(format!("cannot start {}: {err}", self.program)))?;

        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ToolError::Permanent(
                "cannot connect to the command's stdio".into(),
            ));
        };
        let input = arguments.to_string();
        let writer = tokio::spawn(async move {
            // A command that does not read its stdin is fine.
            let _ = stdin.write_all(input.as_bytes()).await;
        });
        let reader = tokio::spawn(async move {
            let mut output = Vec::new();
            let _ = stdout.take(MAX_OUTPUT_BYTES).read_to_end(&mut output).await;
            output
        });
        let progress = {
            let ctx = ctx.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                let mut last = String::new();
                while let Ok(Some(line)) = lines.next_line().await {
                    let line: String = line.chars().take(MAX_PROGRESS_BYTES).collect();
                    if !line.trim().is_empty() {
                        ctx.progress(line.clone()).await;
                        last = line;
                    }
                }
                last
            })
        };

        let status = tokio::select! {
            status = child.wait() => status.map_err(|err| ToolError::Permanent(format!("waiting for {}: {err}", self.program)))?,
            () = ctx.cancelled().cancelled() => {
                self.terminate(&mut child).await;
                return Err(ToolError::Cancelled);
            }
        };
        let _ = writer.await;
        let output = reader.await.unwrap_or_default();
        let last_stderr = progress.await.unwrap_or_default();
        let stdout = String::from_utf8_lossy(&output).trim().to_owned();
        if !status.success() {
            let detail = if last_stderr.is_empty() {
                stdout
            } else {
                last_stderr
            };
            return Ok(error_result(format!(
                "{} exited with {status}: {detail}",
                self.program
            )));
        }
        match serde_json::from_str::<Value>(&stdout) {
            Ok(result @ Value::Object(_)) if result.get("content").is_some() => Ok(result),
            _ => Ok(text_result(stdout)),
        }
    }
}
