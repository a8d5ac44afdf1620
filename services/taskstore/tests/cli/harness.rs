//! Real `taskstore` processes for the CLI tests: a service (`serve` on a
//! fresh PostgreSQL schema, or `dev`) on an ephemeral port with JSON logs,
//! and client commands run against it, each bounded in time.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::common;

pub const BIN: &str = env!("CARGO_BIN_EXE_taskstore");

/// A running service; killed (and reaped) when dropped.
pub struct Service {
    pub child: Child,
    pub endpoint: String,
    logs: std::sync::mpsc::Receiver<String>,
    /// Every log line read so far.
    pub seen: Vec<String>,
}

impl Drop for Service {
    fn drop(&mut self) {
        // Already exited in the passing case; reaped either way.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    /// Sends `signal` (e.g. `-TERM`, `-INT`) to the service.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {signal}");
    }

    /// Waits for the first log event for which `matches` holds.
    pub fn wait_for_log(
        &mut self,
        timeout: Duration,
        matches: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.logs.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no such log line within {timeout:?}; seen: {:#?}",
                    self.seen
                )
            });
            self.seen.push(line.clone());
            let event: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|err| panic!("every log line is JSON ({err}): {line}"));
            if matches(&event) {
                return event;
            }
        }
    }

    /// Every log line the service has written so far (waits briefly for
    /// stragglers).
    pub fn drain_logs(&mut self) -> &[String] {
        while let Ok(line) = self.logs.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(line);
        }
        &self.seen
    }

    /// SIGTERM, then a clean exit within `within`.
    pub fn stop(&mut self, within: Duration) {
        self.signal("-TERM");
        let status = wait_with_timeout(&mut self.child, within);
        assert!(status.success(), "exit status {status:?}");
    }
}

/// The database URL of a fresh schema.
pub async fn fresh_database_url() -> String {
    let (_, schema) = common::fresh_schema().await;
    let separator = if common::database_url().contains('?') {
        '&'
    } else {
        '?'
    };
    format!(
        "{}{separator}options=-c%20search_path%3D{schema}",
        common::database_url()
    )
}

/// `taskstore serve` on `database` (and, unless `extra` says otherwise,
/// RabbitMQ).
pub fn start_serve(database: &str, extra: &[&str]) -> Service {
    let mut command = Command::new(BIN);
    command
        .args([
            "--log-format",
            "json",
            "serve",
            "--auth",
            "none",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--shutdown-grace", "5s"])
        .args(extra)
        .env("TASKSTORE_DATABASE_URL", database);
    launch(command).0
}

/// `taskstore serve` on a fresh schema, with `extra` flags.
pub async fn start_service_with(extra: &[&str]) -> Service {
    start_serve(&fresh_database_url().await, extra)
}

/// `taskstore dev` on `database` with `extra` flags.
pub fn start_dev(database: &str, extra: &[&str]) -> (Service, serde_json::Value) {
    start_dev_at("127.0.0.1:0", database, extra)
}

/// [`start_dev`] with its gRPC API at `listen` (to come back where it was).
pub fn start_dev_at(listen: &str, database: &str, extra: &[&str]) -> (Service, serde_json::Value) {
    let mut command = Command::new(BIN);
    command
        .args(["--log-format", "json", "dev", "--listen", listen])
        .args(["--mcp-listen", "127.0.0.1:0"])
        .args(["--dashboard-listen", "127.0.0.1:0"])
        .args(["--shutdown-grace", "5s", "--database-url", database])
        .args(extra)
        .env_remove("TASKSTORE_DATABASE_URL")
        .env_remove("TASKSTORE_AMQP_URL");
    launch(command)
}

/// Runs `command` (a `taskstore serve` or `dev` with JSON logs) and waits for
/// its `listening` log line, which names the address; returns the service
/// and that line.
pub fn launch(command: Command) -> (Service, serde_json::Value) {
    let mut service = spawn(command);
    let listening = service.wait_for_listening(Duration::from_secs(30));
    (service, listening)
}

/// Runs `command` (a `taskstore serve` or `dev` with JSON logs), following
/// its log; not yet listening.
pub fn spawn(mut command: Command) -> Service {
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn taskstore");
    let (sender, logs) = std::sync::mpsc::channel();
    let mut service = Service {
        child,
        endpoint: String::new(),
        logs,
        seen: Vec::new(),
    };
    let stderr = service.child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    service
}

impl Service {
    /// Waits for the `listening` line and takes the address from it.
    pub fn wait_for_listening(&mut self, timeout: Duration) -> serde_json::Value {
        let listening = self.wait_for_log(timeout, |event| event["message"] == "listening");
        let addr = listening["addr"].as_str().expect("addr field");
        self.endpoint = format!("http://{addr}");
        listening
    }
}

/// What a client command did.
pub struct Ran {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }

    /// The one JSON document a successful `--json` command printed.
    pub fn json(&self) -> serde_json::Value {
        assert!(self.status.success(), "client failed: {}", self.stderr);
        self.only_json()
    }

    /// The one JSON document printed, whatever the exit status.
    pub fn only_json(&self) -> serde_json::Value {
        let lines: Vec<&str> = self.stdout.lines().collect();
        assert_eq!(lines.len(), 1, "one compact JSON line: {}", self.stdout);
        serde_json::from_str(lines[0]).expect("--json prints JSON")
    }
}

/// A client command against `service`.
pub fn client(service: &Service, args: &[&str]) -> Ran {
    run(&with_endpoint(args, &service.endpoint), None, &[])
}

/// `args` followed by `--endpoint <endpoint>`.
pub fn with_endpoint(args: &[&str], endpoint: &str) -> Vec<String> {
    args.iter()
        .map(|a| a.to_string())
        .chain(["--endpoint".to_owned(), endpoint.to_owned()])
        .collect()
}

/// Runs the binary with `args`, `stdin` and `env`, bounded: a hang fails the
/// test naming the command.
pub fn run(args: &[String], stdin: Option<&str>, env: &[(&str, &str)]) -> Ran {
    let mut child = Command::new(BIN)
        .args(args)
        .envs(env.iter().copied())
        .env_remove("NO_COLOR")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the client");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(input.as_bytes()).expect("write stdin");
    }
    // Read both pipes while waiting: a large output would fill a pipe and
    // block the command forever.
    let read_all = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = read_all(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let stderr = read_all(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`taskstore {}` did not finish within 60 s", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ran {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

pub fn wait_with_timeout(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the process did not exit in {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A fresh file name under cargo's per-target scratch directory: `name`
/// with a random part before its extension (`dev.db` → `dev-1a2b….db`).
pub fn scratch_file(name: &str) -> std::path::PathBuf {
    let mut suffix = [0u8; 6];
    getrandom::getrandom(&mut suffix).expect("os randomness");
    let suffix: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    let (stem, extension) = name.split_once('.').unwrap_or((name, ""));
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{stem}-{suffix}.{extension}"))
}

/// Polls `check` every 50 ms until it holds or `timeout` passes.
pub fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    check()
}
