//! A fleet with authentication on, as an operator sets it up: keys made by
//! `taskstore keys create`, a worker with its key in a file, the CLI with
//! the client's; no key, a revoked key or a wrong role is refused, and no
//! key ever appears in a log line.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::common::{self, Env};

fn taskstore(env: &Env, args: &[&str]) -> Output {
    Command::new(common::taskstore_binary())
        .args(args)
        .env("TASKSTORE_DATABASE_URL", &env.database_url)
        .env("TASKSTORE_ENDPOINT", &env.endpoint)
        .env_remove("TASKSTORE_TOKEN")
        .output()
        .expect("run taskstore")
}

/// A new key: `(key id, key)`.
fn make_key(env: &Env, tenant: &str, role: &str) -> (String, String) {
    let output = taskstore(
        env,
        &[
            "keys", "create", "--tenant", tenant, "--role", role, "--name", "e2e", "--json",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let made: Value = serde_json::from_slice(&output.stdout).expect("json");
    (
        made["keyId"].as_str().expect("keyId").to_owned(),
        made["key"].as_str().expect("key").to_owned(),
    )
}

fn write_secret(dir: &Path, name: &str, secret: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("{secret}\n")).expect("write the key file");
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_with_api_keys_runs_tasks_for_key_holders_only() {
    let mut env = Env::new().await;
    let dir = std::env::temp_dir().join(format!("taskworker-keys-{}", env.prefix));
    std::fs::create_dir_all(&dir).expect("dir");
    // The database URL, with a password (the test server trusts any), from
    // a file as a mounted Secret would give it.
    const PASSWORD: &str = "Db-Secret-7f3a9c";
    let with_password = env.database_url.replacen(
        "postgres://postgres@",
        &format!("postgres://postgres:{PASSWORD}@"),
        1,
    );
    assert_ne!(
        with_password, env.database_url,
        "the URL has the expected shape"
    );
    let url_file = write_secret(&dir, "database-url", &with_password);
    env.start_service(&["--auth", "api-keys", "--database-url-file", &url_file]);
    let (client_id, client_key) = make_key(&env, "acme", "client");
    let (_, worker_key) = make_key(&env, "*", "worker");
    let client_file = write_secret(&dir, "client", &client_key);
    let worker_file = write_secret(&dir, "worker", &worker_key);

    let listed = taskstore(&env, &["keys", "list", "--json"]);
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(
        listed.contains(&client_id) && !listed.contains(&client_key),
        "{listed}"
    );

    let _worker = env.start_worker("worker-a", "echo", None, &["--token-file", &worker_file]);
    env.wait_for_consumers("echo", 1).await;

    let created = taskstore(
        &env,
        &[
            "create",
            "--tool",
            "echo",
            "--arguments",
            r#"{"text":"secured"}"#,
            "--dispatch",
            "--json",
            "--token-file",
            &client_file,
        ],
    );
    assert!(created.status.success(), "{created:?}");
    let id = serde_json::from_slice::<Value>(&created.stdout).expect("json")["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    let result = Command::new(common::taskstore_binary())
        .args(["result", &id, "--wait", "--timeout", "30s", "--json"])
        .env("TASKSTORE_ENDPOINT", &env.endpoint)
        .env("TASKSTORE_TOKEN", &client_key)
        .output()
        .expect("run result");
    assert!(result.status.success(), "{result:?}");
    assert!(String::from_utf8_lossy(&result.stdout).contains("secured"));

    // No key: refused, and told how to pass one.
    let anonymous = taskstore(&env, &["get", &id]);
    assert_eq!(anonymous.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&anonymous.stderr).contains("refused the credentials"),
        "{anonymous:?}"
    );
    // The worker's key cannot list tasks.
    let wrong_role = taskstore(&env, &["list", "--token-file", &worker_file]);
    assert_eq!(wrong_role.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&wrong_role.stderr).contains("not allowed"),
        "{wrong_role:?}"
    );

    // Revoked: refused within the revocation delay.
    let revoked = taskstore(&env, &["keys", "revoke", &client_id]);
    assert!(revoked.status.success(), "{revoked:?}");
    tokio::time::sleep(Duration::from_secs(6)).await;
    let after = taskstore(&env, &["get", &id, "--token-file", &client_file]);
    assert_eq!(after.status.code(), Some(1), "{after:?}");
    let again = taskstore(&env, &["keys", "revoke", &client_id]);
    assert_eq!(
        again.status.code(),
        Some(5),
        "revoking twice names nothing to revoke"
    );

    let logs = env.service_logs.lock().expect("logs").join("\n");
    assert!(
        !logs.contains(PASSWORD),
        "the database password reached the service's log"
    );
    for secret in [&client_key, &worker_key] {
        // "tsk_<key id>_<secret>"; the secret is base64url and may itself
        // contain '_', so it is everything after the second one.
        let secret_part = secret.splitn(3, '_').nth(2).expect("secret part");
        assert!(
            !logs.contains(secret_part),
            "a key reached the service's log"
        );
    }
    assert!(
        logs.contains("\"auth\":\"api-keys\""),
        "the listening line names the method"
    );
    std::fs::remove_dir_all(&dir).ok();
    env.cleanup(&["echo"]).await;
}

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../services/taskstore/tests/fixtures")
        .join(name);
    path.canonicalize()
        .expect("the test PKI is there")
        .display()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_with_mtls_runs_tasks_for_certificate_holders() {
    let mut env = Env::new().await;
    let (cert, key, ca) = (
        fixture("server.pem"),
        fixture("server.key"),
        fixture("ca.pem"),
    );
    env.start_service(&[
        "--auth",
        "mtls",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--tls-client-ca",
        &ca,
    ]);
    // The certificate names localhost, not the address.
    let port = env.endpoint.rsplit(':').next().expect("port").to_owned();
    env.endpoint = format!("https://localhost:{port}");
    let (worker_cert, worker_key) = (fixture("worker-fleet.pem"), fixture("worker-fleet.key"));
    let _worker = env.start_worker(
        "worker-tls",
        "echo",
        None,
        &[
            "--ca-cert",
            &ca,
            "--client-cert",
            &worker_cert,
            "--client-key",
            &worker_key,
        ],
    );
    env.wait_for_consumers("echo", 1).await;

    let (client_cert, client_key) = (fixture("client-acme.pem"), fixture("client-acme.key"));
    let as_acme = |args: &[&str]| {
        Command::new(common::taskstore_binary())
            .args(args)
            .args(["--endpoint", &env.endpoint, "--ca-cert", &ca])
            .args(["--client-cert", &client_cert, "--client-key", &client_key])
            .env_remove("TASKSTORE_TOKEN")
            .output()
            .expect("run taskstore")
    };
    let created = as_acme(&[
        "create",
        "--tool",
        "echo",
        "--arguments",
        r#"{"text":"over mtls"}"#,
        "--dispatch",
        "--json",
    ]);
    assert!(created.status.success(), "{created:?}");
    let id = serde_json::from_slice::<Value>(&created.stdout).expect("json")["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    let result = as_acme(&["result", &id, "--wait", "--timeout", "30s", "--json"]);
    assert!(result.status.success(), "{result:?}");
    assert!(String::from_utf8_lossy(&result.stdout).contains("over mtls"));

    // Without a certificate the handshake is refused: unreachable.
    let anonymous = Command::new(common::taskstore_binary())
        .args(["get", &id, "--endpoint", &env.endpoint, "--ca-cert", &ca])
        .env_remove("TASKSTORE_TOKEN")
        .output()
        .expect("run taskstore");
    assert_ne!(anonymous.status.code(), Some(0), "{anonymous:?}");

    let logs = env.service_logs.lock().expect("logs").join("\n");
    assert!(
        logs.contains("\"auth\":\"mtls\""),
        "the listening line names the method"
    );
    env.cleanup(&["echo"]).await;
}

/// `taskworker` with credentials the service refuses: no key, a bogus
/// one, a client's. Not an outage: it says what is wrong and exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_credentials_are_refused_says_so_and_stops() {
    let mut env = Env::new().await;
    env.start_service(&["--auth", "api-keys"]);
    let dir = std::env::temp_dir().join(format!("taskworker-refused-{}", env.prefix));
    std::fs::create_dir_all(&dir).expect("dir");
    let (_, client_key) = make_key(&env, "acme", "client");
    let bogus = write_secret(&dir, "bogus", "bogus.key");
    let client = write_secret(&dir, "client", &client_key);
    for (token, says) in [
        (None, "refused this worker's credentials"),
        (Some(&bogus), "refused this worker's credentials"),
        (Some(&client), "workers need a worker key"),
    ] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_taskworker"));
        command
            .args(["--endpoint", &env.endpoint, "--queue-prefix", &env.prefix])
            .args(["--tools", "echo"])
            .env("TASKWORKER_AMQP_URL", common::amqp_url())
            .env_remove("TASKWORKER_TOKEN")
            .env_remove("TASKWORKER_TOKEN_FILE")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if let Some(file) = token {
            command.args(["--token-file", file]);
        }
        let mut child = command.spawn().expect("spawn taskworker");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "a refused worker exits ({says})"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
            .expect("stderr");
        assert!(!status.success(), "{stderr}");
        assert!(stderr.contains(says), "{says} in {stderr}");
        assert!(!stderr.contains("cannot reach"), "{stderr}");
    }
    std::fs::remove_dir_all(&dir).ok();
    env.cleanup(&["echo"]).await;
}
