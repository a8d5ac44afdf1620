//! `--scenario mcp-call`: what an MCP client's tool call costs through the
//! MCP endpoint (`/mcp`, 2025-11-25, synchronous `tools/call`: the gateway
//! creates a dispatched task and answers with its result), to set beside
//! `e2e`'s create→result over gRPC at the same concurrency.

use std::time::Instant;

use serde_json::{Value, json};

use super::stats::{Recorded, samples};
use super::{BenchError, Shared};

/// One client's loop: its own MCP session, one call after another.
pub(crate) async fn call(
    shared: &Shared,
    index: usize,
    recorded: &mut Recorded,
) -> Result<(), BenchError> {
    let url = shared
        .args
        .mcp_url
        .as_deref()
        .ok_or_else(|| BenchError::Mcp("--scenario mcp-call needs --mcp-url".into()))?;
    let http = reqwest::Client::new();
    let session = initialize(&http, url).await?;
    let mut n = index as u64;
    while !shared.finished() {
        let body = json!({
            "jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": shared.args.tool, "arguments": {"n": n}},
        });
        let started = Instant::now();
        let answer = post(&http, url, Some(&session), &body).await?;
        if let Some(error) = answer.get("error") {
            return Err(BenchError::Mcp(format!("tools/call: {error}")));
        }
        samples(recorded, "mcp_call").record(started.elapsed());
        shared.count_one();
        n += shared.args.clients as u64;
    }
    Ok(())
}

pub(super) async fn initialize(http: &reqwest::Client, url: &str) -> Result<String, BenchError> {
    let body = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "taskstore-bench", "version": env!("CARGO_PKG_VERSION")}},
    });
    let response = http
        .post(url)
        .json(&body)
        .send()
        .await
        .map_err(|err| BenchError::Mcp(format!("cannot reach {url}: {err}")))?;
    response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| BenchError::Mcp(format!("{url} gave no session id")))
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &Value,
) -> Result<Value, BenchError> {
    let mut request = http.post(url).json(body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request
        .send()
        .await
        .map_err(|err| BenchError::Mcp(err.to_string()))?
        .json()
        .await
        .map_err(|err| BenchError::Mcp(err.to_string()))
}
