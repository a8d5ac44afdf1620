//! The README's examples, run as written: every shell block marked
//! `<!-- ci: … -->` runs under `bash -euo pipefail`, in a scratch directory
//! where `target/release` holds the binaries this test run built, with a
//! `cargo` that only knows `cargo build --release` (a no-op here: they are
//! built). The test's environment points the commands at their own port,
//! queue prefix and database, so parallel tests and a developer's own
//! services are left alone; the only edit to a block is the database name.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, Env};

const README: &str = include_str!("../../../README.md");

/// One marked block: what the marker says, and the commands.
#[derive(Debug)]
struct Block {
    marker: String,
    code: String,
}

fn marked_blocks() -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = README.lines();
    while let Some(line) = lines.next() {
        let Some(marker) = line
            .trim()
            .strip_prefix("<!-- ci:")
            .and_then(|rest| rest.strip_suffix("-->"))
        else {
            continue;
        };
        assert_eq!(lines.next(), Some("```sh"), "a marker precedes a sh block");
        let code: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        blocks.push(Block {
            marker: marker.trim().to_owned(),
            code: code.join("\n"),
        });
    }
    blocks
}

/// Every block with `marker`, in the README's order, as one script.
fn blocks(marker: &str) -> String {
    let blocks = marked_blocks();
    let known = [
        "run against dev",
        "mcp against dev",
        "run with PostgreSQL and RabbitMQ",
    ];
    for block in &blocks {
        assert!(
            known.contains(&block.marker.as_str()),
            "an unknown marker: {block:#?}"
        );
    }
    let code: Vec<String> = blocks
        .into_iter()
        .filter(|b| b.marker == marker)
        .map(|b| b.code)
        .collect();
    assert!(!code.is_empty(), "no README block marked {marker:?}");
    code.join("\n")
}

/// A scratch directory whose `target/release` is the directory of this
/// test run's binaries.
fn scratch() -> PathBuf {
    let binaries = common::taskstore_binary()
        .parent()
        .expect("binary directory")
        .to_owned();
    let dir = std::env::temp_dir().join(format!("taskstore-readme-{}", random()));
    std::fs::create_dir_all(dir.join("target")).expect("scratch dir");
    std::os::unix::fs::symlink(&binaries, dir.join("target/release")).expect("symlink");
    dir
}

fn random() -> String {
    let mut bytes = [0u8; 6];
    getrandom::getrandom(&mut bytes).expect("os randomness");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// What a block printed, and whether it succeeded.
struct Ran {
    success: bool,
    output: String,
}

/// Runs `code` with bash in `dir`, in a process group of its own (killed
/// at the end, so background jobs never outlive the test).
fn run_block(dir: &Path, code: &str, env: &[(&str, String)], timeout: Duration) -> Ran {
    let script = format!(
        "set -euo pipefail\n\
         cargo() {{ if [ \"$*\" = 'build --release' ]; then return 0; fi; echo \"unexpected: cargo $*\" >&2; return 1; }}\n\
         {code}\n"
    );
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("bash");
    let group = child.id();
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
    let output = format!(
        "--- stdout\n{}\n--- stderr\n{}",
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default()
    );
    match status {
        Some(status) => Ran {
            success: status.success(),
            output,
        },
        None => panic!("the README block did not finish within {timeout:?}:\n{output}"),
    }
}

/// The quick start's second terminal, against `taskstore dev` started as
/// the quick start's first command does (in the same directory).
#[tokio::test]
async fn the_readme_dev_walkthrough_runs_as_written() {
    let dir = scratch();
    let port = free_port();
    let mcp_port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let mut dev = Command::new(dir.join("target/release/taskstore"))
        .args(["--log-format", "json", "dev"])
        .current_dir(&dir)
        .env("TASKSTORE_LISTEN", format!("127.0.0.1:{port}"))
        .env("TASKSTORE_MCP_LISTEN", format!("127.0.0.1:{mcp_port}"))
        .env_remove("TASKSTORE_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("dev starts");
    let env = [("TASKSTORE_ENDPOINT", endpoint)];
    let ready = run_block(
        &dir,
        "target/release/taskstore status --wait 30s --tool sleep",
        &env,
        Duration::from_secs(60),
    );
    assert!(ready.success, "dev is up: {}", ready.output);

    let ran = run_block(
        &dir,
        &blocks("run against dev"),
        &env,
        Duration::from_secs(120),
    );
    // The MCP block, on this test's port rather than the default one.
    let mcp_block = blocks("mcp against dev");
    assert!(mcp_block.contains("127.0.0.1:50052/mcp"), "{mcp_block}");
    let mcp = run_block(
        &dir,
        &mcp_block.replace(":50052/", &format!(":{mcp_port}/")),
        &env,
        Duration::from_secs(60),
    );
    let _ = Command::new("kill")
        .args(["-TERM", &dev.id().to_string()])
        .status();
    let stopped = dev.wait().expect("dev exits");
    assert!(ran.success, "{}", ran.output);
    assert!(mcp.success, "{}", mcp.output);
    for expected in [
        r#""taskSupport":"optional""#,
        r#""status":"working""#,
        "slept 2000 ms",
        "io.modelcontextprotocol/related-task",
    ] {
        assert!(
            mcp.output.contains(expected),
            "{expected:?} in\n{}",
            mcp.output
        );
    }
    assert!(stopped.success(), "{stopped:?}");
    for expected in [
        "slept 1000 of 3000 ms",
        "completed",
        "\"text\": \"slept 3000 ms\"",
        "TASK ID",
        "health    ok",
    ] {
        assert!(
            ran.output.contains(expected),
            "{expected:?} in\n{}",
            ran.output
        );
    }
    assert!(
        dir.join("taskstore-dev.db").exists(),
        "dev keeps its tasks in the working directory"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// "Run a tool on workers": the service and three workers on PostgreSQL and
/// RabbitMQ (one serving a Python tool that asks), started, used and
/// stopped by the block itself.
#[tokio::test]
async fn the_readme_fleet_example_runs_as_written() {
    let env = Env::new().await;
    let dir = scratch();
    let database = format!("readme_{}", random());
    let code = blocks("run with PostgreSQL and RabbitMQ");
    let edited = code
        .replace("5432/taskstore", &format!("5432/{database}"))
        .replace("-U postgres taskstore", &format!("-U postgres {database}"));
    assert_eq!(
        edited.matches(&database).count(),
        2,
        "the README names its database twice (createdb, --database-url):\n{code}"
    );
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let vars = [
        ("TASKSTORE_LISTEN", format!("127.0.0.1:{port}")),
        ("TASKSTORE_ENDPOINT", endpoint.clone()),
        ("TASKWORKER_ENDPOINT", endpoint),
        ("TASKSTORE_QUEUE_PREFIX", env.prefix.clone()),
        ("TASKWORKER_QUEUE_PREFIX", env.prefix.clone()),
        ("TASKSTORE_AMQP_URL", common::amqp_url()),
        ("TASKWORKER_AMQP_URL", common::amqp_url()),
    ];
    let ran = run_block(&dir, &edited, &vars, Duration::from_secs(150));
    let _ = Command::new("dropdb")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "--if-exists",
            &database,
        ])
        .status();
    env.cleanup(&["echo", "sleep", "fail", "hash", "noop", "delete"])
        .await;
    assert!(ran.success, "{}", ran.output);
    for expected in [
        " of 1000000 items",
        "sha256 chain of 1000000 items",
        "cancelled",
        "health    ok",
        "asks confirm     Delete /tmp/old?",
        "answered confirm",
        "deleted /tmp/old",
    ] {
        assert!(
            ran.output.contains(expected),
            "{expected:?} in\n{}",
            ran.output
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
