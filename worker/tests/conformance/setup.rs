//! Case 11: a worker set up wrong says so instead of looking healthy
//! (issue 38). Pointed at a port that is not the gRPC API (the service's
//! MCP port), it stops at once, naming the mistake; unable to reach the
//! broker, it is listed as not consuming, and the service's status says
//! its tools' tasks wait.

use std::time::Duration;

use crate::fleet::{Fleet, Language};

pub async fn a_misconfigured_worker_says_so(language: Language) {
    let fleet = Fleet::start_with(&["--mcp-listen", "127.0.0.1:0"]).await;
    let mcp = fleet.env.mcp_address();
    let amqp = crate::common::amqp_url();
    let mut astray = fleet.spawn_at(language, "astray", 1, "1s", &mcp, &amqp);
    let exited = astray.wait_exit(Duration::from_secs(30));
    assert!(!exited.success(), "{}", astray.tail());
    let said = astray.tail();
    assert!(said.contains("is not a taskstore service"), "{said}");

    let nowhere = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let closed = format!(
        "amqp://guest:guest@{}/%2f",
        nowhere.local_addr().expect("addr")
    );
    drop(nowhere);
    let endpoint = fleet.env.endpoint.clone();
    let _cut_off = fleet.spawn_at(language, "cut-off", 1, "1s", &endpoint, &closed);
    crate::common::eventually(
        "the cut-off worker is listed as not consuming",
        Duration::from_secs(30),
        || async {
            let status = fleet.status_json();
            status["workers"].as_array().is_some_and(|workers| {
                workers
                    .iter()
                    .any(|w| w["workerId"] == "cut-off" && w["consuming"] == false)
            })
        },
    )
    .await;
    fleet.cleanup().await;
}
