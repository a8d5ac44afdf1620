//! A closed output pipe (`taskstore list | head -1`) ends a command quietly,
//! as `ls | head` does: no panic, no error line, success (issue 38).

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::{BIN, client, start_dev};

#[tokio::test]
async fn a_closed_output_pipe_ends_a_command_quietly() {
    let (mut service, _) = start_dev("memory:", &[]);
    for _ in 0..3 {
        let created = client(&service, &["create", "--tool", "echo", "--json"]);
        assert_eq!(created.code(), 0, "{}", created.stderr);
    }
    for args in [
        vec!["list"],
        vec!["list", "--json"],
        vec!["create", "--tool", "echo"],
        vec!["status"],
    ] {
        // The reader is gone before the command writes anything.
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let done = Command::new(BIN)
            .args(&args)
            .args(["--endpoint", &service.endpoint])
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .expect("run taskstore");
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(done.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?} said: {stderr}");
    }
    service.stop(Duration::from_secs(10));
}

/// A port already taken names the flag of that port (issue 38: the MCP
/// port's conflict named --listen).
#[test]
fn a_taken_port_names_its_own_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let address = taken.local_addr().expect("addr").to_string();
    for (flag, named) in [
        ("--mcp-listen", "--mcp-listen"),
        ("--dashboard-listen", "--dashboard-listen"),
        ("--listen", "--listen (TASKSTORE_LISTEN)"),
    ] {
        let mut args = vec!["dev", "--database-url", "memory:"];
        for (default, value) in [
            ("--listen", "127.0.0.1:0"),
            ("--mcp-listen", "127.0.0.1:0"),
            ("--dashboard-listen", "127.0.0.1:0"),
        ] {
            args.extend([default, if default == flag { &address } else { value }]);
        }
        let done = Command::new(BIN)
            .args(&args)
            .env_remove("TASKSTORE_DATABASE_URL")
            .output()
            .expect("run taskstore dev");
        let said = String::from_utf8_lossy(&done.stderr);
        assert!(!done.status.success(), "{flag}: {said}");
        assert!(
            said.contains(&format!("choose another address with {named}")),
            "{flag}: {said}"
        );
    }
}
