//! Concurrency limits per key, held at every instant (issue 40): a command
//! tool declares "at most 3 at once per customer" and records its own
//! start and end times; two service replicas take the creates, three
//! workers of 4 slots each run them, and a worker and a replica are
//! SIGKILLed mid-run. No customer ever has more than 3 running, every task
//! completes once, and the killed worker's tasks run again elsewhere.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;
use sqlx::postgres::PgPoolOptions;

use crate::common::runs::RecordingTool;
use crate::common::{Env, dispatch};

const LIMIT: usize = 3;
const ACME: usize = 24;
const GLOBEX: usize = 6;

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_keys_limit_holds_at_every_instant_through_kills() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let mut other = env.sibling();
    other.start_service(&[]);

    let tool = RecordingTool::new(&env.prefix, LIMIT);
    let tools = tool.tools_file().to_owned();
    let mut doomed = env.start_worker("worker-limits-1", "none", Some(&tools), &[]);
    let _second = env.start_worker("worker-limits-2", "none", Some(&tools), &[]);
    let _third = env.start_worker("worker-limits-3", "none", Some(&tools), &[]);
    env.wait_for_consumers("limited", 3).await;

    // The creates alternate between the replicas.
    let (mut here, mut there) = (env.client().await, other.client().await);
    let mut ids = Vec::new();
    for n in 0..ACME + GLOBEX {
        let customer = if n % 5 == 4 { "globex" } else { "acme" };
        let client = if n % 2 == 0 { &mut here } else { &mut there };
        ids.push(dispatch(client, "limited", json!({ "customer": customer }), None).await);
    }
    // Mid-run, a worker dies, then a replica.
    tokio::time::sleep(Duration::from_millis(700)).await;
    doomed.kill_9();
    let worker_killed_at = now_ns();
    tokio::time::sleep(Duration::from_millis(500)).await;
    if let Some(replica) = other.service.as_mut() {
        replica.kill_9();
    }

    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&env.database_url)
        .await
        .expect("PostgreSQL");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let done: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM tasks WHERE status = 'completed' AND task_id = ANY($1)",
        )
        .bind(&ids)
        .fetch_one(&pool)
        .await
        .expect("count");
        if done as usize == ids.len() {
            break;
        }
        let statuses: Vec<(String, String, i32)> =
            sqlx::query_as("SELECT task_id, status, attempt FROM tasks WHERE task_id = ANY($1)")
                .bind(&ids)
                .fetch_all(&pool)
                .await
                .expect("statuses");
        assert!(
            Instant::now() < deadline,
            "{done} of {} completed: {statuses:?}",
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Every run the tool recorded; a run whose end is missing died with
    // its worker, when it was killed.
    let runs = tool.runs(worker_killed_at);
    let cut_short = runs.cut_short;
    for customer in ["acme", "globex"] {
        let most = runs.most_at_once(customer);
        eprintln!("limits: {customer} ran at most {most} at once");
        assert!(
            most <= LIMIT as i32,
            "{customer} ran {most} at once, over its limit of {LIMIT}"
        );
        if customer == "acme" {
            assert_eq!(
                most, LIMIT as i32,
                "acme's backlog used its whole limit (else this proves nothing)"
            );
        }
    }
    // Each task completed once: one run per task, plus a second run for
    // each run the killed worker cut short.
    let reruns: i64 =
        sqlx::query_scalar("SELECT count(*) FROM tasks WHERE attempt > 1 AND task_id = ANY($1)")
            .bind(&ids)
            .fetch_one(&pool)
            .await
            .expect("reruns");
    eprintln!(
        "limits: {} runs, {cut_short} cut short by the kill, {reruns} tasks run again",
        runs.started
    );
    assert!(
        runs.started >= ids.len() && runs.started <= ids.len() + 4,
        "{} runs of {} tasks (the killed worker held at most 4)",
        runs.started,
        ids.len()
    );
    env.cleanup(&["limited"]).await;
}

/// Records `start <ns> <task>` (each run once) and sleeps a little.
const QUICK_SCRIPT: &str = r#"#!/bin/sh
read -r arguments
echo "start $(date +%s%N) $TASKSTORE_TASK_ID" >> "$RUNS_LOG"
sleep 0.05
echo done
"#;

const RATE: usize = 20;
const RATED_TASKS: usize = 70;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_keys_rate_holds_in_every_window() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let dir = std::env::temp_dir().join(format!("taskworker-rates-{}", env.prefix));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let script = dir.join("tool.sh");
    std::fs::write(&script, QUICK_SCRIPT).expect("script");
    let log = dir.join("runs.log");
    let tools = dir.join("tools.json");
    std::fs::write(
        &tools,
        json!({"tools": {"rated": {
            "command": ["sh", script.to_str().expect("utf-8 path")],
            "env": {"RUNS_LOG": log.to_str().expect("utf-8 path")},
            "rate": {"starts": RATE, "per": "1s"},
        }}})
        .to_string(),
    )
    .expect("tools file");
    // 12 slots of 50 ms tasks could start 240 a second: the rate binds.
    let _workers: Vec<_> = (1..=3)
        .map(|n| env.start_worker(&format!("worker-rates-{n}"), "none", Some(&tools), &[]))
        .collect();
    env.wait_for_consumers("rated", 3).await;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&env.database_url)
        .await
        .expect("PostgreSQL");
    // What the service counts: its decisions' rows of jobs sent, each kept
    // for its window (`dispatch_starts`), read every 50 ms. A decision
    // writes its rows in one transaction with one expiry, so the largest
    // count seen per expiry is that decision's.
    let sends = std::sync::Arc::new(std::sync::Mutex::new(HashMap::<i64, i64>::new()));
    let watching = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let observer = {
        let (pool, sends, watching) = (pool.clone(), sends.clone(), watching.clone());
        tokio::spawn(async move {
            while watching.load(std::sync::atomic::Ordering::SeqCst) {
                let rows: Vec<(i64, i64)> = sqlx::query_as(
                    "SELECT (extract(epoch FROM expires_at) * 1e6)::int8, count(*)
                     FROM dispatch_starts WHERE tool = 'rated' GROUP BY expires_at",
                )
                .fetch_all(&pool)
                .await
                .expect("starts");
                {
                    let mut seen_sends = sends.lock().expect("lock");
                    for (at, n) in rows {
                        let seen = seen_sends.entry(at).or_default();
                        *seen = (*seen).max(n);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let mut client = env.client().await;
    let mut ids = Vec::new();
    for _ in 0..RATED_TASKS {
        ids.push(dispatch(&mut client, "rated", json!({}), None).await);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM tasks WHERE status = 'completed' AND attempt = 1
             AND task_id = ANY($1)",
        )
        .bind(&ids)
        .fetch_one(&pool)
        .await
        .expect("count");
        if done as usize == ids.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{done} of {} completed",
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    watching.store(false, std::sync::atomic::Ordering::SeqCst);
    observer.await.expect("observer");
    // The service's rule, exactly: at most RATE sends within any window.
    let mut sent: Vec<i64> = Vec::new();
    for (at, n) in sends.lock().expect("lock").iter() {
        sent.extend(std::iter::repeat_n(*at, usize::try_from(*n).unwrap_or(0)));
    }
    sent.sort_unstable();
    assert_eq!(sent.len(), RATED_TASKS, "every send was seen");
    let most_sent = (0..sent.len())
        .map(|i| {
            sent[i..]
                .iter()
                .take_while(|at| **at < sent[i] + 1_000_000)
                .count()
        })
        .max()
        .unwrap_or(0);
    eprintln!("rates: at most {most_sent} jobs sent within any second");
    assert!(
        most_sent <= RATE,
        "{most_sent} sent within one second, over the rate of {RATE}"
    );
    // When each task's attempt started: its claim, by the service's clock
    // (the program's own start adds the worker's process spawn, whose
    // delay varies with the machine's load).
    let mut starts: Vec<u128> = sqlx::query_scalar::<_, f64>(
        "SELECT (extract(epoch FROM (attempt_history->'records'->0->>'startedAt')::timestamptz)
                * 1e6)::float8 FROM tasks WHERE task_id = ANY($1)",
    )
    .bind(&ids)
    .fetch_all(&pool)
    .await
    .expect("claim times")
    .into_iter()
    .map(|us| (us as u128) * 1000)
    .collect();
    let runs = std::fs::read_to_string(&log)
        .expect("runs log")
        .lines()
        .count();
    assert_eq!(runs, RATED_TASKS, "each task ran once");
    starts.sort_unstable();
    assert_eq!(starts.len(), RATED_TASKS, "each task claimed once");
    // The most starts within any one second (a window from each start).
    let second = 1_000_000_000u128;
    let most = (0..starts.len())
        .map(|i| {
            starts[i..]
                .iter()
                .take_while(|at| **at < starts[i] + second)
                .count()
        })
        .max()
        .unwrap_or(0);
    let took = (starts[starts.len() - 1] - starts[0]) as f64 / 1e9;
    // Claims follow the sends, bunched by the delivery's jitter (prefetched
    // jobs wait for a busy machine's worker): reported, and bounded loosely.
    eprintln!("rates: at most {most} claims in any second; {RATED_TASKS} claims took {took:.2} s");
    assert!(
        most <= 2 * RATE,
        "{most} claims within one second: far over the rate of {RATE}"
    );
    assert!(
        took >= (RATED_TASKS / RATE - 1) as f64,
        "the starts took {took:.2} s: the rate did not bind (else this proves nothing)"
    );
    env.cleanup(&["rated"]).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first run of all is told to wait a second (a 429): it says so and
/// fails; every later run records its start and succeeds.
const POLITE_SCRIPT: &str = r#"#!/bin/sh
read -r arguments
if mkdir "$RUNS_LOG.told" 2>/dev/null; then
  echo "told $(date +%s%N) $TASKSTORE_TASK_ID" >> "$RUNS_LOG"
  echo '{"taskstore":"back_off","after":"1s"}' >&2
  echo 'upstream said 429' >&2
  exit 1
fi
echo "start $(date +%s%N) $TASKSTORE_TASK_ID" >> "$RUNS_LOG"
echo done
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_back_off_holds_the_tools_tasks_until_its_time() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let dir = std::env::temp_dir().join(format!("taskworker-backoff-{}", env.prefix));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let script = dir.join("tool.sh");
    std::fs::write(&script, POLITE_SCRIPT).expect("script");
    let log = dir.join("runs.log");
    let tools = dir.join("tools.json");
    std::fs::write(
        &tools,
        json!({"tools": {"polite": {
            "command": ["sh", script.to_str().expect("utf-8 path")],
            "env": {"RUNS_LOG": log.to_str().expect("utf-8 path")},
            // One at a time: the second task waits for the first.
            "concurrency": {"max": 1},
        }}})
        .to_string(),
    )
    .expect("tools file");
    let _worker = env.start_worker("worker-backoff", "none", Some(&tools), &[]);
    env.wait_for_consumers("polite", 1).await;
    let mut client = env.client().await;
    let first = dispatch(&mut client, "polite", json!({}), None).await;
    let second = dispatch(&mut client, "polite", json!({}), None).await;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&env.database_url)
        .await
        .expect("PostgreSQL");
    let ids = [first.clone(), second.clone()];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let done: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM tasks WHERE status = 'completed' AND task_id = ANY($1)",
        )
        .bind(&ids[..])
        .fetch_one(&pool)
        .await
        .expect("count");
        if done == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "{done} of 2 completed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = std::fs::read_to_string(&log).expect("runs log");
    let at = |kind: &str, task: &str| -> u128 {
        text.lines()
            .find(|line| line.starts_with(kind) && line.ends_with(task))
            .and_then(|line| line.split(' ').nth(1)?.parse().ok())
            .unwrap_or_else(|| panic!("no {kind} of {task} in {text}"))
    };
    let told = at("told", &first);
    let second_started = at("start", &second);
    let first_started = at("start", &first);
    let waited = |at: u128| (at.saturating_sub(told)) as f64 / 1e6;
    eprintln!(
        "back-off: the second task started {:.0} ms, the first again {:.0} ms after the 429",
        waited(second_started),
        waited(first_started)
    );
    // Nothing of the tool started before the time it was told (the key is
    // the whole tool: it declares no key).
    assert!(waited(second_started) >= 950.0, "{text}");
    assert!(waited(first_started) >= 950.0, "{text}");
    let attempts: Vec<i32> = sqlx::query_scalar("SELECT attempt FROM tasks WHERE task_id = $1")
        .bind(&first)
        .fetch_all(&pool)
        .await
        .expect("attempts");
    assert_eq!(attempts, [1], "the back-off spent no attempt");
    env.cleanup(&["polite"]).await;
    let _ = std::fs::remove_dir_all(&dir);
}
