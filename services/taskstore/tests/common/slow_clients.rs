//! Clients that hold a port's connections without logging in (issue 37,
//! defect 3): ones that trickle a form's body, and HTTP/2 ones that sent
//! their preface and then nothing. Each runs until its socket closes, and
//! says when that was.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// The HTTP/2 client preface and an empty SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// Holds a connection open until the server closes it (or `for_at_most`).
async fn hold(mut stream: TcpStream, trickle: bool, for_at_most: Duration) {
    let until = tokio::time::Instant::now() + for_at_most;
    let mut buffer = [0u8; 4096];
    loop {
        tokio::select! {
            read = stream.read(&mut buffer) => match read {
                // Closed by the server, or reset.
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            () = tokio::time::sleep(Duration::from_millis(300)), if trickle => {
                if stream.write_all(b"a").await.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep_until(until) => return,
        }
    }
}

/// `count` connections that each POST a form to `path` without a session,
/// announcing a large body and sending it a byte at a time.
pub async fn trickling_forms(
    addr: SocketAddr,
    path: &str,
    count: usize,
    for_at_most: Duration,
) -> Vec<JoinHandle<()>> {
    let mut held = Vec::new();
    for _ in 0..count {
        let Ok(mut stream) = TcpStream::connect(addr).await else {
            continue;
        };
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 200000\r\nSec-Fetch-Site: same-origin\r\n\r\n"
        );
        if stream.write_all(head.as_bytes()).await.is_ok() {
            held.push(tokio::spawn(hold(stream, true, for_at_most)));
        }
    }
    held
}

/// `count` connections that send the HTTP/2 preface and then nothing
/// (never answering a ping, never opening a stream).
pub async fn silent_http2(
    addr: SocketAddr,
    count: usize,
    for_at_most: Duration,
) -> Vec<JoinHandle<()>> {
    let mut held = Vec::new();
    for _ in 0..count {
        let Ok(mut stream) = TcpStream::connect(addr).await else {
            continue;
        };
        if stream.write_all(H2_PREFACE).await.is_ok() {
            held.push(tokio::spawn(hold(stream, false, for_at_most)));
        }
    }
    held
}
