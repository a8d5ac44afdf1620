//! A mixed fleet under chaos (issue 25): Rust, Python and TypeScript workers
//! serving the same conformance tools take 500 dispatched tasks while one
//! worker of each language is SIGKILLed mid-task and RabbitMQ restarts;
//! every task completes exactly once with its own result. It restarts the
//! shared RabbitMQ, so it runs in the `restarts` profile, alone (and a
//! guard starts the broker again however the test ends).

#[path = "common/mod.rs"]
mod common;
#[path = "conformance/fleet.rs"]
mod fleet;

use std::collections::{BTreeMap, HashMap};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleet::{Fleet, Language, WorkerProcess, text};
use serde_json::json;
use taskstore_proto::v1 as pb;
use tokio_stream::StreamExt;

const TASKS: usize = 500;
/// Every fifth task sleeps a little over a second (a different length
/// each, so each result is its own), so that workers are always mid-task.
const SLEEP_EVERY: usize = 5;
/// How long the dispatching goes on, while the kills and the restart happen.
const DISPATCH_FOR: Duration = Duration::from_secs(15);
const TOOLS: &[&str] = &["conf_echo", "conf_sleep"];

/// Starts RabbitMQ again when dropped, even after a failed assertion.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl").arg("start_app").status();
        let _ = Command::new("rabbitmqctl")
            .args(["await_startup", "--timeout", "60"])
            .status();
    }
}

fn stop_rabbitmq() {
    let status = Command::new("rabbitmqctl")
        .arg("stop_app")
        .status()
        .expect("rabbitmqctl");
    assert!(status.success(), "rabbitmqctl stop_app: {status:?}");
}

/// Task `i`: its tool, arguments and the one right result.
fn task(i: usize) -> (&'static str, serde_json::Value, String) {
    if i.is_multiple_of(SLEEP_EVERY) {
        let ms = 1000 + i;
        ("conf_sleep", json!({ "ms": ms }), format!("slept {ms} ms"))
    } else {
        let said = format!("task {i} of the mixed fleet");
        ("conf_echo", json!({ "text": said }), said)
    }
}

/// What the change feed showed: completions per task (a second would be a
/// second stored result) and claims per worker, before and after the
/// broker came back.
#[derive(Default)]
struct Seen {
    completions: HashMap<String, u32>,
    claims: BTreeMap<String, (u32, u32)>,
    resyncs: u32,
    broker_back: bool,
}

fn watch(fleet: &Fleet, seen: Arc<Mutex<Seen>>) -> tokio::task::JoinHandle<()> {
    let mut client = fleet.client.clone();
    tokio::spawn(async move {
        let mut changes = client
            .watch_tasks(pb::WatchTasksRequest { session_id: None })
            .await
            .expect("WatchTasks")
            .into_inner();
        while let Some(Ok(event)) = changes.next().await {
            let mut seen = seen.lock().expect("seen");
            match event.event {
                Some(pb::task_event::Event::Changed(task)) => {
                    if task.status() == pb::TaskStatus::Completed {
                        *seen.completions.entry(task.task_id).or_default() += 1;
                    } else if let Some(worker) = task
                        .status_message
                        .as_deref()
                        .and_then(|m| m.strip_prefix("running on "))
                        .and_then(|m| m.split(" (attempt").next())
                    {
                        let back = seen.broker_back;
                        let counts = seen.claims.entry(worker.to_owned()).or_default();
                        if back { counts.1 += 1 } else { counts.0 += 1 }
                    }
                }
                Some(pb::task_event::Event::Resync(_)) => seen.resyncs += 1,
                None => {}
            }
        }
    })
}

/// The sleeps `worker` runs, once it runs one that started less than half
/// a second ago (a sleep lasts over a second: it is still running when the
/// worker is killed a moment later).
async fn held_by(fleet: &Fleet, worker: &WorkerProcess) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ids = fleet.tasks_held(&worker.id, "conf_sleep").await;
        let mut young = Vec::new();
        for id in ids {
            let message = fleet.get(&id).await.status_message.unwrap_or_default();
            let step = message
                .strip_prefix("step ")
                .and_then(|n| n.parse::<u32>().ok());
            if step.is_some_and(|step| step <= 5) {
                young.push(id);
            }
        }
        if !young.is_empty() {
            return young;
        }
        assert!(Instant::now() < deadline, "{} never ran a sleep", worker.id);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mixed_fleet_completes_every_task_once_through_kills_and_a_broker_restart() {
    let fleet = Fleet::start().await;
    let mut workers = Vec::new();
    for language in Language::ALL {
        for n in 1..=2 {
            let id = format!("{}-{n}", language.name());
            workers.push(fleet.spawn(language, &id, 4, "2s"));
        }
    }
    for worker in &mut workers {
        fleet.wait_consuming(worker, TOOLS, 1).await;
    }
    fleet.wait_consuming(&mut workers[0], TOOLS, 6).await;

    let seen = Arc::new(Mutex::new(Seen::default()));
    let watcher = watch(&fleet, seen.clone());
    let started = Instant::now();
    let dispatcher = {
        let client = fleet.client.clone();
        tokio::spawn(async move {
            let gap = DISPATCH_FOR / TASKS as u32;
            let mut ids = Vec::with_capacity(TASKS);
            for i in 0..TASKS {
                let (tool, arguments, _) = task(i);
                let request = common::dispatch_request(tool, arguments, Some(5));
                let id = client.clone().create_task(request).await.expect("create");
                ids.push(id.into_inner().task_id);
                tokio::time::sleep(gap).await;
            }
            ids
        })
    };

    // One worker of each language is killed while it runs tasks.
    let mut killed = Vec::new();
    for victim in workers.iter_mut().step_by(2) {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let held = held_by(&fleet, victim).await;
        victim.kill_9();
        eprintln!("chaos: SIGKILLed {} holding {held:?}", victim.id);
        killed.push((victim.id.clone(), held));
    }
    // Then RabbitMQ restarts while tasks still flow.
    let restore = Restore;
    stop_rabbitmq();
    eprintln!("chaos: RabbitMQ stopped at {:?}", started.elapsed());
    tokio::time::sleep(Duration::from_secs(3)).await;
    drop(restore);
    seen.lock().expect("seen").broker_back = true;
    eprintln!("chaos: RabbitMQ back at {:?}", started.elapsed());

    let ids = dispatcher.await.expect("dispatcher");
    let deadline = Duration::from_secs(150);
    for (i, id) in ids.iter().enumerate() {
        let left = deadline
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1));
        let done = fleet.result(id, left).await;
        let (tool, _, right) = task(i);
        assert_eq!(
            done.status(),
            pb::TaskStatus::Completed,
            "task {i} ({tool}) {id}"
        );
        assert_eq!(text(&done), right, "task {i} ({tool}) {id}: its own result");
    }
    let drained = started.elapsed();

    // The killed workers' tasks ran again, elsewhere.
    for (worker, held) in &killed {
        let mut rerun = 0;
        for id in held {
            if fleet.attempts(id).await.0 >= 2 {
                rerun += 1;
            }
        }
        assert!(
            rerun >= 1,
            "none of the tasks {worker} held when killed ran again: {held:?}"
        );
    }
    // Each surviving worker came back to the broker.
    for worker in workers.iter_mut().skip(1).step_by(2) {
        assert!(
            worker.exited().is_none(),
            "{} died:\n{}",
            worker.id,
            worker.tail()
        );
    }
    fleet.wait_consuming(&mut workers[1], TOOLS, 3).await;

    let mut reruns = 0;
    for id in &ids {
        if fleet.attempts(id).await.0 > 1 {
            reruns += 1;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    watcher.abort();
    let seen = std::mem::take(&mut *seen.lock().expect("seen"));
    let twice: Vec<_> = seen.completions.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "tasks completed more than once: {twice:?}"
    );
    eprintln!(
        "mixed fleet: {TASKS} tasks completed once each with their own results in {drained:?}; \
         {reruns} ran more than once (killed mid-task); claims per worker (before, after the \
         broker restart): {:?}; completions seen {} (resyncs {})",
        seen.claims,
        seen.completions.len(),
        seen.resyncs
    );
    fleet.cleanup().await;
}
