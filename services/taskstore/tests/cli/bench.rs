//! The load generator's smoke run.

use std::time::Duration;

use crate::harness::{client, start_dev};

/// CI's smoke of the load generator: every scenario runs briefly against
/// `taskstore dev` (in memory) and reports figures. Not a measurement.
#[tokio::test]
async fn bench_runs_every_scenario_and_reports() {
    let (mut service, listening) = start_dev("memory:", &[]);
    let mcp_url = listening["mcp"]
        .as_str()
        .expect("dev serves MCP")
        .to_owned();
    for (scenario, operation) in [
        ("create", "create"),
        ("get", "get"),
        ("poll", "create_to_result"),
        ("e2e", "create_to_worker_start"),
        ("list", "list_page"),
        ("watch", "watch_delivery"),
        ("mcp-call", "mcp_call"),
        ("mcp-streams", "stream_delivery"),
    ] {
        let output = client(
            &service,
            &[
                "bench",
                "--scenario",
                scenario,
                "--clients",
                "2",
                "--duration",
                "1s",
                "--tasks",
                "50",
                "--poll-interval",
                "20ms",
                "--mcp-url",
                &mcp_url,
                "--streams",
                "8",
                "--listeners",
                "2",
                "--active-sessions",
                "2",
                "--rate",
                "40",
            ],
        );
        assert!(output.status.success(), "{scenario}: {}", output.stderr);
        let report: serde_json::Value =
            serde_json::from_str(&output.stdout).expect("a JSON report");
        assert_eq!(report["scenario"], scenario);
        let figures = &report["operations"][operation];
        assert!(
            figures["count"].as_u64().is_some_and(|n| n > 0),
            "{scenario}: {report}"
        );
        assert!(
            figures["p99_ms"]
                .as_f64()
                .is_some_and(|p| p >= figures["p50_ms"].as_f64().unwrap_or(0.0))
        );
    }
    service.stop(Duration::from_secs(30));
}
