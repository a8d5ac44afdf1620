//! What a newcomer hits in the first hour (issue 22): each message names
//! what the user set and what is valid, and the one rules hold the same on
//! every path.

use std::time::Duration;

use crate::harness::{
    BIN, Service, client, launch, run, scratch_file, start_service_with, with_endpoint,
};

fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// `taskstore serve --auth api-keys` on `database`.
fn serve_with_keys(database: &str) -> Service {
    let mut command = std::process::Command::new(BIN);
    command
        .args(["--log-format", "json", "serve", "--auth", "api-keys"])
        .args(["--listen", "127.0.0.1:0", "--shutdown-grace", "5s"])
        .env("TASKSTORE_DATABASE_URL", database);
    launch(command).0
}

#[test]
fn token_errors_name_the_setting_the_user_set() {
    let from_env = run(
        &owned(&["list"]),
        None,
        &[("TASKSTORE_TOKEN_FILE", "/nonexistent/token")],
    );
    assert_eq!(from_env.code(), 2, "{}", from_env.stderr);
    assert!(
        from_env
            .stderr
            .contains("TASKSTORE_TOKEN_FILE: cannot read the token file")
            && !from_env.stderr.contains("--token"),
        "{}",
        from_env.stderr
    );
    let from_flag = run(
        &owned(&["list", "--token-file", "/nonexistent/token"]),
        None,
        &[],
    );
    assert!(
        from_flag.stderr.contains("--token-file: cannot read"),
        "{}",
        from_flag.stderr
    );
    let both = run(
        &owned(&["list"]),
        None,
        &[
            ("TASKSTORE_TOKEN", "tsk_x"),
            ("TASKSTORE_TOKEN_FILE", "/nonexistent/token"),
        ],
    );
    assert_eq!(both.code(), 2, "{}", both.stderr);
    assert_eq!(
        both.stderr.trim(),
        "error: TASKSTORE_TOKEN and TASKSTORE_TOKEN_FILE are both set: unset one"
    );
    // A typed flag wins over a variable of the other kind.
    let typed = run(
        &owned(&["list", "--token-file", "/nonexistent/token"]),
        None,
        &[("TASKSTORE_TOKEN", "tsk_x")],
    );
    assert!(
        typed.stderr.contains("--token-file: cannot read"),
        "{}",
        typed.stderr
    );
    let tenant = run(&owned(&["list", "--tenant", "*"]), None, &[]);
    assert_eq!(tenant.code(), 2, "{}", tenant.stderr);
    assert!(
        tenant.stderr.contains("--tenant must name one tenant"),
        "{}",
        tenant.stderr
    );
}

#[test]
fn usage_errors_list_what_is_valid() {
    let status = run(&owned(&["list", "--status", "bogus"]), None, &[]);
    assert_eq!(status.code(), 2);
    assert!(
        status
            .stderr
            .contains("(one of working, input_required, completed, failed, cancelled)"),
        "{}",
        status.stderr
    );
    let array = run(
        &owned(&["create", "--tool", "echo", "--arguments", "[1]"]),
        None,
        &[],
    );
    assert_eq!(
        array.code(),
        2,
        "refused before connecting: {}",
        array.stderr
    );
    assert!(
        array
            .stderr
            .contains("--arguments must be a JSON object, not an array"),
        "{}",
        array.stderr
    );
    let serve = std::process::Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            "memory:",
        ])
        .env_remove("TASKSTORE_AUTH")
        .output()
        .expect("run serve");
    assert!(!serve.status.success());
    let said = String::from_utf8_lossy(&serve.stderr);
    for method in ["api-keys", "jwt", "mtls", "none"] {
        assert!(said.contains(method), "{method} in {said}");
    }
}

#[test]
fn keys_take_the_database_before_or_after_their_action() {
    let file = scratch_file("keys.db");
    let database = format!("sqlite://{}", file.display());
    let after = run(
        &owned(&[
            "keys",
            "create",
            "--tenant",
            "acme",
            "--role",
            "client",
            "--json",
            "--database-url",
            &database,
        ]),
        None,
        &[],
    );
    assert_eq!(after.code(), 0, "{}", after.stderr);
    let listed = run(
        &owned(&["keys", "--database-url", &database, "list"]),
        None,
        &[],
    );
    assert_eq!(listed.code(), 0, "{}", listed.stderr);
    assert!(
        listed.stdout.contains("LAST USED") && listed.stdout.contains("never"),
        "{}",
        listed.stdout
    );
    let _ = std::fs::remove_file(&file);
}

#[tokio::test]
async fn status_is_degraded_while_no_worker_can_run_a_task() {
    let service = start_service_with(&[]).await;
    // Healthy but for its workers, once the queue is connected.
    let store_only = client(&service, &["status", "--without-workers", "--wait", "10s"]);
    assert_eq!(store_only.code(), 0, "{}", store_only.stdout);
    let alone = client(&service, &["status"]);
    assert_eq!(alone.code(), 8, "{}{}", alone.stdout, alone.stderr);
    assert!(
        alone.stdout.contains("DEGRADED: no worker is reporting"),
        "{}",
        alone.stdout
    );
    let json = client(&service, &["status", "--json"]).only_json();
    assert_eq!(json["healthy"], false);
    assert!(
        json["problems"][0]
            .as_str()
            .is_some_and(|p| p.contains("no worker is reporting")),
        "{json}"
    );
}

/// A wrong RabbitMQ password is one clear line naming the login, not a
/// stream of the AMQP library's errors; `status` says for how long.
#[tokio::test]
async fn a_refused_broker_login_is_said_once_and_plainly() {
    let url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let wrong = url.replacen(":guest@", ":not-the-password@", 1);
    assert_ne!(wrong, url, "the test URL has guest's password");
    let mut service = start_service_with(&["--amqp-url", &wrong]).await;
    std::thread::sleep(Duration::from_secs(4));
    let status = client(&service, &["status"]);
    assert_eq!(status.code(), 8);
    assert!(
        status.stdout.contains("queue     rabbitmq: DOWN for ") && !status.stdout.contains(" ago:"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("refused the login"),
        "{}",
        status.stdout
    );
    let logs = service.drain_logs().to_vec();
    let errors: Vec<&String> = logs
        .iter()
        .filter(|l| l.contains("\"level\":\"ERROR\""))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let outage: Vec<&String> = logs
        .iter()
        .filter(|l| l.contains("refused the login"))
        .collect();
    assert_eq!(outage.len(), 1, "one line per outage: {logs:#?}");
}

/// The key an operator rotates can be watched: every call's access line
/// names the key, `keys list` shows when it was last used, and its
/// refusals after revocation say so.
#[tokio::test]
async fn key_rotation_can_be_followed_in_the_log_and_keys_list() {
    let database = crate::harness::fresh_database_url().await;
    let mut service = serve_with_keys(&database);
    let keys = |args: &[&str]| {
        let mut all = owned(&["keys"]);
        all.extend(owned(args));
        all.extend(owned(&["--database-url", &database]));
        run(&all, None, &[])
    };
    let made = keys(&["create", "--tenant", "acme", "--role", "client", "--json"]);
    let made: serde_json::Value = serde_json::from_str(made.stdout.trim()).expect("json");
    let (key_id, key) = (
        made["keyId"].as_str().expect("keyId").to_owned(),
        made["key"].as_str().expect("key").to_owned(),
    );
    let listed = run(
        &with_endpoint(&["list"], &service.endpoint),
        None,
        &[("TASKSTORE_TOKEN", &key)],
    );
    assert_eq!(listed.code(), 0, "{}", listed.stderr);
    let caller = format!("key:{key_id}");
    service.wait_for_log(Duration::from_secs(10), |event| {
        event["target"] == "taskstore::access"
            && event["caller"] == caller.as_str()
            && event["rpc.method"] == "ListTasks"
            && event["code"] == "OK"
    });
    assert!(
        crate::harness::eventually(Duration::from_secs(10), || {
            let listed = keys(&["list", "--json"]);
            listed.stdout.lines().any(|line| {
                let key: serde_json::Value = serde_json::from_str(line).expect("json");
                key["keyId"] == key_id.as_str() && key["lastUsedAt"].is_string()
            })
        }),
        "keys list shows the key's last use"
    );
    assert_eq!(keys(&["revoke", &key_id]).code(), 0);
    std::thread::sleep(Duration::from_secs(6));
    let refused = run(
        &with_endpoint(&["list"], &service.endpoint),
        None,
        &[("TASKSTORE_TOKEN", &key)],
    );
    assert_eq!(refused.code(), 1, "{}", refused.stderr);
    service.wait_for_log(Duration::from_secs(10), |event| {
        event["message"] == "request refused: not authenticated"
            && event["credential"] == caller.as_str()
            && event["reason"] == "revoked"
    });
    // "tsk_<key id>_<secret>"; the secret is base64url and may itself
    // contain '_', so it is everything after the second one.
    let secret = key.splitn(3, '_').nth(2).expect("secret part");
    assert!(
        !service
            .drain_logs()
            .iter()
            .any(|line| line.contains(secret)),
        "the key's secret never reaches the log"
    );
}

/// An operator's key reaches every tenant and names the one it acts in;
/// without a name it is told to give one, never shown an empty tenant.
#[tokio::test]
async fn an_admin_of_every_tenant_names_the_tenant_it_acts_in() {
    let database = crate::harness::fresh_database_url().await;
    let service = serve_with_keys(&database);
    let key = |tenant: &str, role: &str| {
        let made = run(
            &owned(&[
                "keys",
                "create",
                "--tenant",
                tenant,
                "--role",
                role,
                "--json",
                "--database-url",
                &database,
            ]),
            None,
            &[],
        );
        let made: serde_json::Value = serde_json::from_str(made.stdout.trim()).expect("json");
        made["key"].as_str().expect("key").to_owned()
    };
    let (acme, admin) = (key("acme", "client"), key("*", "admin"));
    let as_key = |key: &str, args: &[&str], env: &[(&str, &str)]| {
        let mut vars = vec![("TASKSTORE_TOKEN", key)];
        vars.extend_from_slice(env);
        run(&with_endpoint(args, &service.endpoint), None, &vars)
    };
    let created = as_key(&acme, &["create", "--tool", "echo", "--json"], &[]);
    let id = created.json()["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();

    let unnamed = as_key(&admin, &["get", &id], &[]);
    assert_eq!(unnamed.code(), 2, "{}", unnamed.stderr);
    assert!(
        unnamed.stderr.contains("reach every tenant") && unnamed.stderr.contains("--tenant"),
        "{}",
        unnamed.stderr
    );
    let named = as_key(&admin, &["get", &id, "--tenant", "acme", "--json"], &[]);
    assert_eq!(named.json()["taskId"], id.as_str());
    let listed = as_key(&admin, &["list", "--json"], &[("TASKSTORE_TENANT", "acme")]);
    let listed = listed.json();
    assert_eq!(listed["tasks"][0]["taskId"], id.as_str(), "{listed}");
    let elsewhere = as_key(&admin, &["get", &id, "--tenant", "globex"], &[]);
    assert_eq!(elsewhere.code(), 5, "{}", elsewhere.stderr);
    // A tenant's own key naming another tenant is refused.
    let foreign = as_key(&acme, &["get", &id, "--tenant", "globex"], &[]);
    assert_eq!(foreign.code(), 1, "{}", foreign.stderr);
    assert!(
        foreign.stderr.contains("do not reach that tenant"),
        "{}",
        foreign.stderr
    );
}

/// Tasks are counted where they are made, whatever the edge: a call
/// through `/mcp` counts as one through gRPC does.
#[tokio::test]
async fn tasks_created_through_mcp_are_counted() {
    let (service, listening) =
        crate::harness::start_dev("memory:", &["--metrics-listen", "127.0.0.1:0"]);
    let mcp = listening["mcp"]
        .as_str()
        .expect("dev serves MCP")
        .to_owned();
    // Logged before `listening`, so among the lines read already.
    let metrics = service
        .seen
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|event| event["message"] == "serving metrics on /metrics")
        .expect("dev serves metrics");
    let http = reqwest::Client::new();
    let post = |body: serde_json::Value, session: Option<String>| {
        let mut request = http
            .post(&mcp)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let initialized = post(
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "first-hour", "version": "1"}}}),
        None,
    )
    .await
    .expect("initialize");
    let session = initialized
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let called: serde_json::Value = post(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "counted"}}}),
        session,
    )
    .await
    .expect("tools/call")
    .json()
    .await
    .expect("json");
    assert_eq!(
        called["result"]["content"][0]["text"], "counted",
        "{called}"
    );
    let scraped = http
        .get(format!(
            "http://{}/metrics",
            metrics["addr"].as_str().expect("addr")
        ))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("text");
    let value = |series: &str| {
        scraped
            .lines()
            .find_map(|line| line.strip_prefix(series))
            .and_then(|rest| rest.trim().parse::<f64>().ok())
    };
    assert_eq!(
        value("taskstore_tasks_created_total{dispatched=\"true\"}"),
        Some(1.0),
        "{scraped}"
    );
    assert_eq!(
        value("taskstore_tasks_finished_total{status=\"completed\"}"),
        Some(1.0),
        "{scraped}"
    );
}
