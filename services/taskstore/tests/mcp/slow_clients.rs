//! Slow and surplus connections cannot hold the MCP port (issue 37,
//! defect 3): a slow sender is cut off, connections over the cap are
//! closed at accept, and idle ones (HTTP/2 too) are closed.

use serde_json::json;
use taskstore::auth::AuthMethod;

use crate::common;
use crate::harness::{Caller, Gateway};

/// A connection that never finishes its headers is closed after the
/// deadline, and connections past the cap are closed at once; the gateway
/// goes on answering.
#[tokio::test]
async fn slow_and_surplus_connections_are_closed() {
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let gateway = Gateway::on_with(common::migrated_pool().await, AuthMethod::None, 0, |mcp| {
        mcp.header_read_timeout = Duration::from_millis(500);
        mcp.max_connections = 3;
    })
    .await;
    let closed_within = |mut stream: tokio::net::TcpStream, limit: Duration| async move {
        let mut buffer = [0u8; 256];
        // Closed: read answers 0 (or an error) before the limit.
        matches!(
            tokio::time::timeout(limit, stream.read(&mut buffer)).await,
            Ok(Ok(0) | Err(_))
        )
    };
    // Half a request line, then nothing: closed after the header deadline.
    let mut slow = tokio::net::TcpStream::connect(gateway.mcp)
        .await
        .expect("connects");
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("writes");
    assert!(
        closed_within(slow, Duration::from_secs(5)).await,
        "a slow sender is cut off"
    );

    // Three idle connections take every slot; the fourth is closed at once.
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(
            tokio::net::TcpStream::connect(gateway.mcp)
                .await
                .expect("connects"),
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let surplus = tokio::net::TcpStream::connect(gateway.mcp)
        .await
        .expect("accepted");
    assert!(
        closed_within(surplus, Duration::from_millis(400)).await,
        "over the cap: closed"
    );
    // The idle ones sent no headers either: the deadline closes them, their
    // slots come back, and requests are served again.
    for connection in idle {
        assert!(
            closed_within(connection, Duration::from_secs(5)).await,
            "an idle connection is cut off"
        );
    }
    let caller = Caller::new(&gateway, None);
    assert_eq!(caller.ok("ping", json!({})).await, json!({}));
    gateway.stop().await;
}

/// HTTP/2 connections that sent their preface and then nothing hold no
/// slot for long (issue 37, defect 3): once idle they are closed, and a
/// caller is answered while the whole cap was held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_http2_connections_holding_the_cap_are_closed_when_idle() {
    use std::time::{Duration, Instant};

    const CAP: usize = 16;
    let gateway = Gateway::on_with(common::migrated_pool().await, AuthMethod::None, 0, |mcp| {
        mcp.max_connections = CAP;
        mcp.idle_timeout = Duration::from_secs(2);
    })
    .await;
    let hold = Duration::from_secs(60);
    let silent = common::slow_clients::silent_http2(gateway.mcp, CAP, hold).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        silent.iter().all(|held| !held.is_finished()),
        "the silent connections hold the cap"
    );
    let started = Instant::now();
    loop {
        let caller = Caller {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .expect("client"),
            ..Caller::new(&gateway, None)
        };
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
        let answered = tokio::time::timeout(Duration::from_secs(2), async {
            caller
                .http
                .post(&caller.url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(body)
                .send()
                .await
                .ok()
                .map(|response| response.status().as_u16())
        })
        .await;
        if let Ok(Some(status)) = answered {
            assert_eq!(status, 200);
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no answer while silent connections hold the cap"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for connection in silent {
        tokio::time::timeout(Duration::from_secs(15), connection)
            .await
            .expect("an idle HTTP/2 connection is closed")
            .expect("client");
    }
    gateway.stop().await;
}
