//! Slow clients cannot make the dashboard unreachable (issue 37, defect 3):
//! forms are read only after the session is checked, and HTTP/2
//! connections that open no stream are closed once idle, so a logged-in
//! viewer gets an answer while the port's whole connection cap is held.

use std::time::{Duration, Instant};

use taskstore::domain::Role;

use crate::common::slow_clients::{silent_http2, trickling_forms};
use crate::harness::Board;

const CAP: usize = 16;
const IDLE: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logged_in_viewer_gets_answers_while_slow_clients_hold_the_cap() {
    let board = Board::with(|settings| {
        settings.max_connections = CAP;
        settings.header_read_timeout = Duration::from_secs(1);
        settings.idle_timeout = IDLE;
    })
    .await;
    let viewer = board.browser(&board.key("acme", Role::Client).await).await;
    let addr = board.addr;
    let hold = Duration::from_secs(60);

    let forms = trickling_forms(addr, "/tasks/some-task/cancel", CAP, hold).await;
    let started = Instant::now();
    for form in forms {
        tokio::time::timeout(Duration::from_secs(5), form)
            .await
            .expect("a form without a session is answered, not read")
            .expect("client");
    }
    assert!(started.elapsed() < Duration::from_secs(5));

    // The forms' connections were closed: their slots come back at once.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let silent = silent_http2(addr, CAP, hold).await;
    let started = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // One slot is the viewer's own keep-alive connection (from logging
    // in); the silent ones hold every other.
    let closed = silent.iter().filter(|held| held.is_finished()).count();
    assert!(
        closed <= 1,
        "{closed} of {CAP} silent connections closed at once"
    );
    let answered = loop {
        match tokio::time::timeout(Duration::from_secs(2), viewer.try_get("/tasks")).await {
            Ok(Some(status)) => break status,
            _ if started.elapsed() > Duration::from_secs(20) => {
                panic!("no answer while silent HTTP/2 connections hold the cap")
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    assert_eq!(answered, 200);
    for connection in silent {
        tokio::time::timeout(Duration::from_secs(15), connection)
            .await
            .expect("an idle HTTP/2 connection is closed")
            .expect("client");
    }
}
