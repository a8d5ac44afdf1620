//! One run of a command tool's program: its stdio wired to the line
//! protocol (`protocol.rs`), stopped on cancellation or timeout, and its
//! exit turned into the call's outcome.

use std::process::{ExitStatus, Stdio};

use async_trait::async_trait;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::protocol::{Line, Message, PROTOCOL_VERSION, answer_line};
use super::{CommandTool, MAX_MESSAGE_BYTES, MAX_OUTPUT_BYTES, MAX_PROGRESS_BYTES};
use crate::AskError;
use crate::tool::{Tool, ToolContext, ToolError, ToolInfo, text_result};

/// Prefixes of the worker's own variables, kept from the program: they may
/// hold the worker's key or the broker's password.
const PRIVATE_PREFIXES: [&str; 2] = ["TASKWORKER_", "TASKSTORE_"];

/// What the program's stderr said, once it closed.
#[derive(Debug, Default)]
struct Stderr {
    /// The last line of free text: the reason given for a failure.
    last_text: String,
    /// The first message that broke the protocol.
    broken: Option<String>,
    /// The latest back-off it asked for.
    back_off: Option<std::time::SystemTime>,
}

#[async_trait]
impl Tool for CommandTool {
    fn describe(&self) -> ToolInfo {
        self.info.clone()
    }

    async fn call(&self, ctx: ToolContext, arguments: Value) -> Result<Value, ToolError> {
        let mut child = self.spawn(&ctx)?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ToolError::Permanent(
                "cannot connect to the command's stdio".into(),
            ));
        };
        // The arguments, then (interactive) each answer; stdin closes when
        // the last sender is gone.
        let (lines, mut to_stdin) = mpsc::unbounded_channel::<String>();
        let _ = lines.send(format!("{arguments}\n"));
        let writer = tokio::spawn(async move {
            while let Some(line) = to_stdin.recv().await {
                // A command that does not read its stdin is fine.
                if stdin.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
        });
        let answers = self.interactive.then(|| lines.clone());
        drop(lines);
        let reader = tokio::spawn(read_output(stdout));
        let stderr = tokio::spawn(follow_stderr(BufReader::new(stderr), ctx.clone(), answers));

        let timeout = async {
            match self.timeout {
                Some(limit) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        let status = tokio::select! {
            status = child.wait() => status.map_err(|err| {
                ToolError::Permanent(format!("waiting for {}: {err}", self.program.display()))
            })?,
            () = ctx.cancelled().cancelled() => {
                self.terminate(&mut child).await;
                return Err(ToolError::Cancelled);
            }
            () = timeout => {
                self.terminate(&mut child).await;
                let limit = humantime::format_duration(self.timeout.unwrap_or_default());
                return Err(ToolError::Retryable(format!("timed out after {limit}")));
            }
        };
        let output = reader.await.unwrap_or(Output::Overflowed);
        let stderr = stderr.await.unwrap_or_default();
        writer.abort();
        self.outcome(status, output, stderr)
    }
}

impl CommandTool {
    fn spawn(&self, ctx: &ToolContext) -> Result<Child, ToolError> {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (name, _) in std::env::vars_os() {
            if name
                .to_str()
                .is_some_and(|name| PRIVATE_PREFIXES.iter().any(|p| name.starts_with(p)))
            {
                command.env_remove(name);
            }
        }
        let (attempt, max_attempts) = ctx.attempt();
        command
            .envs(&self.env)
            .env("TASKSTORE_PROTOCOL", PROTOCOL_VERSION.to_string())
            .env("TASKSTORE_TASK_ID", ctx.task_id())
            .env("TASKSTORE_ATTEMPT", attempt.to_string())
            .env("TASKSTORE_MAX_ATTEMPTS", max_attempts.to_string());
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        command.spawn().map_err(|err| {
            let within = match &self.cwd {
                Some(cwd) => format!(" in {}", cwd.display()),
                None => String::new(),
            };
            ToolError::Permanent(format!(
                "cannot start {}{within}: {err}",
                self.program.display()
            ))
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

    /// What the run comes to: a result, a failed result saying why, or a
    /// retry.
    fn outcome(
        &self,
        status: ExitStatus,
        output: Output,
        stderr: Stderr,
    ) -> Result<Value, ToolError> {
        let program = self.program.display();
        if let Some(broken) = stderr.broken {
            return Err(ToolError::Permanent(format!(
                "{program} broke the line protocol: {broken}"
            )));
        }
        let Output::Complete(stdout) = output else {
            return Err(ToolError::Permanent(format!(
                "{program} printed more than {MAX_OUTPUT_BYTES} bytes on stdout"
            )));
        };
        let stdout = String::from_utf8_lossy(&stdout).trim().to_owned();
        let reason = match stderr.last_text.trim() {
            "" => String::new(),
            last => format!(": {last}"),
        };
        if status.success() {
            return Ok(call_tool_result(&stdout).unwrap_or_else(|| text_result(stdout)));
        }
        if let Some(until) = stderr.back_off {
            return Err(ToolError::BackOff {
                until,
                message: format!("{program} was told to wait{reason}"),
            });
        }
        if status
            .code()
            .is_some_and(|code| self.retry_exit_codes.contains(&code))
        {
            return Err(ToolError::Retryable(format!(
                "{program} exited with {status}, asking for a retry{reason}"
            )));
        }
        // The reason first (it becomes the status message), then what the
        // program printed.
        let mut content = vec![
            json!({"type": "text", "text": format!("{program} exited with {status}{reason}")}),
        ];
        match call_tool_result(&stdout) {
            Some(printed) => {
                if let Some(items) = printed.get("content").and_then(Value::as_array) {
                    content.extend(items.iter().cloned());
                }
            }
            None if !stdout.is_empty() => content.push(json!({"type": "text", "text": stdout})),
            None => {}
        }
        Ok(json!({ "content": content, "isError": true }))
    }
}

/// The printed text as a `CallToolResult`, when it is one.
fn call_tool_result(stdout: &str) -> Option<Value> {
    match serde_json::from_str::<Value>(stdout) {
        Ok(result @ Value::Object(_)) if result.get("content").is_some_and(Value::is_array) => {
            Some(result)
        }
        _ => None,
    }
}

/// The program's stdout.
#[derive(Debug)]
enum Output {
    Complete(Vec<u8>),
    /// More than [`MAX_OUTPUT_BYTES`]: the rest was read and dropped, so
    /// the program never blocks on a full pipe.
    Overflowed,
}

async fn read_output(stdout: impl tokio::io::AsyncRead + Unpin) -> Output {
    let mut kept = Vec::new();
    let mut limited = stdout.take(MAX_OUTPUT_BYTES as u64 + 1);
    if limited.read_to_end(&mut kept).await.is_err() {
        return Output::Complete(kept);
    }
    if kept.len() <= MAX_OUTPUT_BYTES {
        return Output::Complete(kept);
    }
    let _ = tokio::io::copy(&mut limited.into_inner(), &mut tokio::io::sink()).await;
    Output::Overflowed
}

/// Reads stderr line by line: free text becomes progress, messages are
/// carried out. `answers` is the way to the program's stdin when it is
/// interactive.
async fn follow_stderr(
    mut stderr: impl AsyncBufRead + Unpin,
    ctx: ToolContext,
    answers: Option<mpsc::UnboundedSender<String>>,
) -> Stderr {
    let mut said = Stderr::default();
    let mut line = Vec::new();
    while let Ok(Some(())) = read_line(&mut stderr, MAX_MESSAGE_BYTES, &mut line).await {
        let text = String::from_utf8_lossy(&line);
        match Line::parse(&text) {
            Line::Text(text) if text.trim().is_empty() => {}
            Line::Text(text) => {
                let text = truncate(&text, MAX_PROGRESS_BYTES);
                ctx.progress(text.clone()).await;
                said.last_text = text;
            }
            Line::Message(Message::Ask { key, request }) => match &answers {
                Some(answers) => {
                    // Asked in the background: the program may go on
                    // talking while it waits.
                    let (ctx, answers) = (ctx.clone(), answers.clone());
                    tokio::spawn(async move {
                        let line = match ctx.ask(&key, request).await {
                            Ok(answer) | Err(AskError::Declined(answer)) => {
                                answer_line(&key, Ok(&answer))
                            }
                            Err(AskError::Refused(why)) => answer_line(&key, Err(&why)),
                            // The program is stopped: no answer to give.
                            Err(AskError::Stopped | AskError::Parked) => return,
                        };
                        let _ = answers.send(line);
                    });
                }
                None => {
                    said.broken.get_or_insert(
                        "ask: a tool that asks must be declared \"interactive\": true in the tools file".to_owned(),
                    );
                }
            },
            Line::Message(Message::BackOff { until }) => {
                said.back_off = Some(until);
            }
            Line::Message(message) => {
                if let Some(status) = message.status_message() {
                    ctx.progress(truncate(&status, MAX_PROGRESS_BYTES)).await;
                }
            }
            Line::Unknown(kind) => {
                tracing::warn!(message_type = %kind, "command tool sent a message this worker does not know; skipped");
            }
            Line::Malformed(why) => {
                said.broken.get_or_insert(why);
            }
        }
    }
    said
}

/// The next line (without its newline) into `line`, at most `max` bytes of
/// it kept; `None` at the end.
async fn read_line(
    reader: &mut (impl AsyncBufRead + Unpin),
    max: usize,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<()>> {
    line.clear();
    let mut read_any = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(read_any.then_some(()));
        }
        read_any = true;
        let (chunk, ends) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..at], Some(at + 1)),
            None => (available, None),
        };
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = ends.unwrap_or(available.len());
        reader.consume(used);
        if ends.is_some() {
            return Ok(Some(()));
        }
    }
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn truncate(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded_and_split_on_newlines() {
        let input = format!("short\n{}\nlast", "x".repeat(100));
        let mut reader = BufReader::with_capacity(7, input.as_bytes());
        let mut line = Vec::new();
        let mut lines = Vec::new();
        while let Ok(Some(())) = read_line(&mut reader, 10, &mut line).await {
            lines.push(String::from_utf8_lossy(&line).into_owned());
        }
        assert_eq!(lines, ["short", "xxxxxxxxxx", "last"]);
    }

    #[test]
    fn truncation_keeps_whole_characters() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("abc", 10), "abc");
    }

    #[tokio::test]
    async fn stdout_past_the_limit_is_an_overflow_not_a_cut_result() {
        let big = vec![b'a'; MAX_OUTPUT_BYTES + 10];
        assert!(matches!(read_output(&big[..]).await, Output::Overflowed));
        let fits = vec![b'a'; MAX_OUTPUT_BYTES];
        assert!(
            matches!(read_output(&fits[..]).await, Output::Complete(kept) if kept.len() == MAX_OUTPUT_BYTES)
        );
    }
}
