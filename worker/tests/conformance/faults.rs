//! Cases 4, 8 and 9 of `docs/worker-conformance.md`: a worker process that
//! dies, freezes past its lease, or is told to stop, while it runs a task.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::json;
use taskstore_proto::v1 as pb;
use tokio_stream::StreamExt;

use crate::fleet::{Fleet, Language, text};

const WAIT: Duration = Duration::from_secs(30);

fn step_of(task: &pb::Task) -> Option<u32> {
    task.status_message
        .as_deref()
        .and_then(|m| m.strip_prefix("step "))
        .and_then(|n| n.parse().ok())
}

/// Case 4: `conf_crash` with 2 attempts ends the worker process each time (a
/// supervisor restarts it) → FAILED `failed after 2 attempts: …`; the
/// restarted worker serves on.
pub async fn a_poison_job(language: Language) {
    let fleet = Fleet::start().await;
    let mut worker = fleet.start_worker(language, "crash-0", 1, "2s", 1).await;
    let poison = fleet.dispatch("conf_crash", json!({}), Some(2)).await;
    let mut crashes = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let task = fleet.get(&poison).await;
        if task.status() == pb::TaskStatus::Failed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the poison task never failed: {task:?}"
        );
        if let Some(status) = worker.exited() {
            assert!(
                status.code() == Some(137) || status.signal() == Some(9),
                "conf_crash ends the process with status 137 (or SIGKILL): {status}; its last lines:\n{}",
                worker.tail()
            );
            crashes += 1;
            // Not waited for until it consumes: the restarted worker may
            // take the poison job again and die before it has subscribed
            // to every queue, which is what the supervisor sees too.
            worker = fleet.spawn(language, &format!("crash-{crashes}"), 1, "2s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(crashes, 2, "the worker died once per attempt");
    let failed = fleet.result(&poison, WAIT).await;
    let message = failed
        .task
        .and_then(|t| t.status_message)
        .unwrap_or_default();
    assert!(message.contains("failed after 2 attempts"), "{message}");
    assert_eq!(fleet.attempts(&poison).await, (2, None));
    let id = fleet
        .dispatch("conf_echo", json!({"text": "still serving"}), None)
        .await;
    assert_eq!(text(&fleet.result(&id, WAIT).await), "still serving");
    drop(worker);
    fleet.cleanup().await;
}

/// Case 8: A worker frozen (SIGSTOP) mid-`conf_sleep` loses its lease; the task
/// is dispatched again and runs from the start (on the other worker, or on
/// the thawed one as a new attempt); thawed (SIGCONT) once its lease
/// expired, its first attempt's reports are refused: its progress never
/// shows again and its result (it had less left to sleep) is not the one
/// stored. It goes on serving.
pub async fn a_stale_lease_fenced(language: Language) {
    let fleet = Fleet::start().await;
    let stale = fleet.start_worker(language, "stale", 1, "2s", 1).await;
    let id = fleet
        .dispatch("conf_sleep", json!({"ms": 4000}), None)
        .await;
    // A second in: what it has left (< 3 s) is less than a fresh run.
    fleet
        .until_seen("the sleep is a second in", &id, WAIT, |t| {
            step_of(t).is_some_and(|step| step >= 10)
        })
        .await;
    assert_eq!(fleet.attempts(&id).await, (1, Some("stale".into())));
    let mut changes = fleet
        .client
        .clone()
        .watch_tasks(pb::WatchTasksRequest { session_id: None })
        .await
        .expect("WatchTasks")
        .into_inner();
    stale.signal(Signal::SIGSTOP);
    // (Not waited for: the frozen worker may or may not hold consumers,
    // as its library matches them to free slots.)
    let mut fresh = fleet.spawn(language, "fresh", 1, "2s");
    let deadline = Instant::now() + WAIT;
    while fleet.attempts(&id).await == (1, Some("stale".into())) {
        assert!(
            Instant::now() < deadline,
            "the frozen worker's lease never expired"
        );
        if let Some(status) = fresh.exited() {
            panic!("the fresh worker exited ({status}):\n{}", fresh.tail());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stale.signal(Signal::SIGCONT);

    // Every change from the latest claim on (the second, or a later one) is
    // that attempt's: its steps only go up (a report of the stale attempt
    // would jump back). A later one happens when the thawed worker claims
    // the second attempt itself, in the session it has not yet learned is
    // over, and stops it when it learns: nobody keeps that attempt alive,
    // and a third runs.
    let mut steps = Vec::new();
    let mut claimed_at = None;
    let mut last_attempt = 1;
    loop {
        let event = tokio::time::timeout(WAIT, changes.next())
            .await
            .expect("the watch stalled")
            .expect("the watch ended")
            .expect("an event");
        let Some(pb::task_event::Event::Changed(task)) = event.event else {
            continue;
        };
        if task.task_id != id {
            continue;
        }
        let message = task.status_message.clone().unwrap_or_default();
        if message.starts_with("running on") && !message.contains("(attempt 1 ") {
            claimed_at = Some(Instant::now());
            last_attempt = message
                .split("(attempt ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse().ok())
                .expect("the claim's message names its attempt");
            steps.clear();
        } else if let Some(step) = step_of(&task).filter(|_| claimed_at.is_some()) {
            steps.push(step);
        }
        if task.status() != pb::TaskStatus::Working {
            assert_eq!(task.status(), pb::TaskStatus::Completed, "{task:?}");
            break;
        }
    }
    let took = claimed_at.expect("the second claim was seen").elapsed();
    assert!(
        steps.windows(2).all(|w| w[0] < w[1]),
        "a report of the stale attempt was taken after the second claim: steps {steps:?}"
    );
    assert!(
        took >= Duration::from_millis(3500),
        "the task completed {took:?} after the second claim: sooner than its 4 s sleep, so the stale attempt's result was taken"
    );
    let done = fleet.result(&id, WAIT).await;
    assert_eq!(text(&done), "slept 4000 ms");
    assert_eq!(
        fleet.attempts(&id).await,
        (last_attempt, None),
        "one result, of the last attempt claimed"
    );

    // The fenced worker survived its refusals and serves on.
    fresh.kill_9();
    let mut stale = stale;
    assert!(
        stale.exited().is_none(),
        "the fenced worker exited:\n{}",
        stale.tail()
    );
    let next = fleet
        .dispatch("conf_echo", json!({"text": "after the fence"}), None)
        .await;
    assert_eq!(text(&fleet.result(&next, WAIT).await), "after the fence");
    fleet.cleanup().await;
}

/// Case 9: SIGTERM mid-`conf_sleep` with a shorter grace → the worker gives the
/// task back (the attempt not counted), leaves the fleet and exits 0; the
/// task completes on another worker.
pub async fn a_graceful_stop_gives_the_task_back(language: Language) {
    let fleet = Fleet::start().await;
    let mut leaving = fleet.start_worker(language, "leaving", 1, "500ms", 1).await;
    let id = fleet
        .dispatch("conf_sleep", json!({"ms": 3000}), None)
        .await;
    fleet
        .until("the sleep runs", &id, WAIT, |t| step_of(t).is_some())
        .await;
    let stopped_at = Instant::now();
    leaving.signal(Signal::SIGTERM);
    let status = leaving.wait_exit(Duration::from_secs(10));
    assert!(
        status.success(),
        "a graceful stop exits 0: {status}; its last lines:\n{}",
        leaving.tail()
    );
    let took = stopped_at.elapsed();
    assert!(
        took < Duration::from_millis(2500),
        "it stopped {took:?} after SIGTERM: the grace is 500 ms, the tool had ~3 s left"
    );
    let task = fleet.get(&id).await;
    assert_eq!(
        task.status(),
        pb::TaskStatus::Working,
        "given back: {task:?}"
    );
    let message = task.status_message.unwrap_or_default();
    assert!(message.contains("shut down"), "{message}");
    assert_eq!(
        fleet.attempts(&id).await,
        (0, None),
        "the attempt is not counted"
    );
    let tools = fleet
        .client
        .clone()
        .list_tools(pb::ListToolsRequest {})
        .await
        .expect("ListTools")
        .into_inner()
        .tools;
    assert!(
        tools.iter().all(|t| t.workers == 0),
        "a stopped worker says goodbye: {tools:?}"
    );

    let _next = fleet.start_worker(language, "next", 1, "2s", 1).await;
    let done = fleet.result(&id, WAIT).await;
    assert_eq!(
        (done.status(), text(&done).as_str()),
        (pb::TaskStatus::Completed, "slept 3000 ms")
    );
    assert_eq!(fleet.attempts(&id).await.0, 1, "one counted attempt");
    fleet.cleanup().await;
}
