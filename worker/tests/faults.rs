//! Faults, injected into real processes: nothing is lost and no result is
//! stored twice. (Restarts of the shared PostgreSQL and RabbitMQ are in
//! `restarts.rs`, which runs alone.)

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Env, dispatch, eventually, get, is_running, result, text_of};
use serde_json::json;
use taskstore_proto::v1 as pb;

fn scratch_dir(env: &Env, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("taskworker-{name}-{}", env.prefix));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn write_tools(dir: &Path, tools: serde_json::Value) -> PathBuf {
    let path = dir.join("tools.json");
    std::fs::write(&path, json!({ "tools": tools }).to_string()).expect("tools file");
    path
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_a_worker_killed_mid_task_finish_on_another() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let mut doomed = env.start_worker("doomed", "sleep", None, &[]);
    env.wait_for_consumers("sleep", 1).await;
    let mut client = env.client().await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(dispatch(&mut client, "sleep", json!({"ms": 3000}), None).await);
    }
    for id in &ids {
        // The doomed worker is the only one yet: running means running there.
        eventually(
            "every task runs on the doomed worker",
            Duration::from_secs(20),
            || {
                let mut client = client.clone();
                let id = id.clone();
                async move { is_running(&mut client, &id).await }
            },
        )
        .await;
    }
    let _survivor = env.start_worker("survivor", "sleep", None, &[]);
    doomed.kill_9();

    for id in &ids {
        let done = result(&mut client, id, Duration::from_secs(60)).await;
        assert_eq!(done.status(), pb::TaskStatus::Completed);
        assert_eq!(
            text_of(&done.result_json),
            "slept 3000 ms",
            "the correct result, stored once"
        );
    }
    env.cleanup(&["sleep"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_crash_between_commit_and_publish_loses_no_job() {
    let mut env = Env::new().await;
    env.start_service(&["--fault", "crash-before-publish"]);
    let port = env.endpoint.rsplit(':').next().expect("port").to_owned();
    let mut client = env.client().await;
    let id = dispatch(&mut client, "echo", json!({"text": "survived"}), None).await;
    let status = env
        .service
        .as_mut()
        .expect("service")
        .wait_exit(Duration::from_secs(20));
    assert!(
        !status.success(),
        "the fault point aborted the service: {status:?}"
    );

    // Same port, no fault: the committed job is still in the outbox.
    env.start_service(&["--listen", &format!("127.0.0.1:{port}")]);
    let _worker = env.start_worker("worker-a", "echo", None, &[]);
    let mut client = env.client().await;
    let done = result(&mut client, &id, Duration::from_secs(30)).await;
    assert_eq!(text_of(&done.result_json), "survived");
    env.cleanup(&["echo"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_delivered_twice_runs_once() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let dir = scratch_dir(&env, "twice");
    let runs = dir.join("runs");
    let script = format!("echo run >> {}; sleep 1; echo ran", runs.display());
    let tools = write_tools(&dir, json!({"count": {"command": ["sh", "-c", script]}}));
    let _a = env.start_worker("worker-a", "none", Some(&tools), &[]);
    let _b = env.start_worker("worker-b", "none", Some(&tools), &[]);
    // Workers declare the exchange and queue once the service knows them.
    env.wait_for_consumers("count", 2).await;
    let mut client = env.client().await;
    let id = dispatch(&mut client, "count", json!({}), None).await;

    // The relay publishes the job once; deliver two more copies of it.
    let connection =
        lapin::Connection::connect(&common::amqp_url(), lapin::ConnectionProperties::default())
            .await
            .expect("rabbitmq");
    let channel = connection.create_channel().await.expect("channel");
    let job = taskstore_proto::jobs::JobMessage {
        tenant_id: "default".into(),
        task_id: id.clone(),
        generation: 1,
        tool: "count".into(),
        trace_context: None,
    };
    for _ in 0..2 {
        channel
            .basic_publish(
                format!("{}.jobs", env.prefix).as_str().into(),
                "count".into(),
                lapin::options::BasicPublishOptions::default(),
                &job.to_bytes(),
                lapin::BasicProperties::default(),
            )
            .await
            .expect("publish a duplicate");
    }
    let done = result(&mut client, &id, Duration::from_secs(30)).await;
    assert_eq!(text_of(&done.result_json), "ran");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(lines(&runs), 1, "the tool ran once for three deliveries");
    let _ = connection.close(200, "done".into()).await;
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup(&["count"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_task_fails_after_its_attempts_while_others_flow() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let dir = scratch_dir(&env, "poison");
    // The command kills the worker that runs it, every time.
    let tools = write_tools(
        &dir,
        json!({"poison": {"command": ["sh", "-c", "kill -9 $PPID"]}}),
    );
    let mut client = env.client().await;
    let poison = dispatch(&mut client, "poison", json!({}), Some(2)).await;
    let mut healthy = Vec::new();
    for i in 0..5 {
        healthy.push(
            dispatch(
                &mut client,
                "echo",
                json!({"text": format!("ok {i}")}),
                None,
            )
            .await,
        );
    }

    // A supervisor, as Kubernetes would be: restart the worker when it dies.
    let mut generation = 0;
    let mut worker = env.start_worker("w0", "echo", Some(&tools), &[]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let task = get(&mut client, &poison).await;
        if task.status() == pb::TaskStatus::Failed {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the poison task never failed: {task:?}"
        );
        if worker.has_exited() {
            generation += 1;
            worker = env.start_worker(&format!("w{generation}"), "echo", Some(&tools), &[]);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let failed = result(&mut client, &poison, Duration::from_secs(5)).await;
    let message = failed
        .task
        .and_then(|t| t.status_message)
        .unwrap_or_default();
    assert!(message.contains("failed after 2 attempts"), "{message}");
    assert!(
        generation >= 2,
        "the worker crashed on each attempt ({generation} restarts)"
    );

    if worker.has_exited() {
        worker = env.start_worker("final", "echo", Some(&tools), &[]);
    }
    for (i, id) in healthy.iter().enumerate() {
        let done = result(&mut client, id, Duration::from_secs(60)).await;
        assert_eq!(text_of(&done.result_json), format!("ok {i}"));
    }
    drop(worker);
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup(&["echo", "poison"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_running_tasks_finish_and_gives_back_the_rest() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let mut leaving = env.start_worker("leaving", "sleep", None, &["--shutdown-grace", "2s"]);
    env.wait_for_consumers("sleep", 1).await;
    let mut client = env.client().await;
    let short = dispatch(&mut client, "sleep", json!({"ms": 1000}), None).await;
    let long = dispatch(&mut client, "sleep", json!({"ms": 8000}), None).await;
    for id in [&short, &long] {
        eventually(
            "both run on the leaving worker",
            Duration::from_secs(20),
            || {
                let mut client = client.clone();
                let id = id.clone();
                async move { is_running(&mut client, &id).await }
            },
        )
        .await;
    }
    leaving.signal("-TERM");
    let status = leaving.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "graceful exit: {status:?}");
    let done = result(&mut client, &short, Duration::from_secs(5)).await;
    assert_eq!(
        text_of(&done.result_json),
        "slept 1000 ms",
        "finished within the grace period"
    );

    let given_back = get(&mut client, &long).await;
    assert_eq!(given_back.status(), pb::TaskStatus::Working);
    let message = given_back.status_message.unwrap_or_default();
    assert!(message.contains("shut down"), "{message}");
    let _next = env.start_worker("next", "sleep", None, &[]);
    let done = result(&mut client, &long, Duration::from_secs(30)).await;
    assert_eq!(done.status(), pb::TaskStatus::Completed);
    let task = done.task.expect("task");
    assert!(
        task.status_message.is_none()
            || !task
                .status_message
                .unwrap_or_default()
                .contains("attempt 2")
    );
    env.cleanup(&["sleep"]).await;
}

/// A worker told to stop after its service has gone (a pod rolled away
/// from under a worker pinned to it) still exits soon after its grace
/// period: giving its running task back cannot reach the service, and the
/// task's lease lapses instead (the reaper dispatches it again). The same
/// holds with the service killed (checked by hand; not kept as a second
/// test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stops_soon_after_its_grace_even_with_its_service_gone() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let mut worker = env.start_worker("orphan", "sleep", None, &[]);
    let mut client = env.client().await;
    let id = dispatch(&mut client, "sleep", json!({ "ms": 30_000 }), None).await;
    eventually("the task runs", Duration::from_secs(30), || {
        let (mut client, id) = (client.clone(), id.clone());
        async move { is_running(&mut client, &id).await }
    })
    .await;
    let mut service = env.service.take().expect("service");
    service.signal("-TERM");
    service.wait_exit(Duration::from_secs(30));

    let asked = std::time::Instant::now();
    worker.signal("-TERM");
    // The harness's grace is 3 s; giving back and saying goodbye get a few
    // seconds more between them before the worker gives up on the service.
    let status = worker.wait_exit(Duration::from_secs(30));
    let took = asked.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "the worker took {took:?} to stop without its service ({status:?})"
    );
    env.cleanup(&["sleep"]).await;
}

/// Issue 41: 2,000 tasks running at once on two workers, each worker keeping
/// one session and one attempt stream for all of them. One worker is
/// SIGKILLed mid-run: its session expires, every one of its attempts runs
/// again on the survivor, and every task completes with one result (a
/// second attempt only for the killed worker's tasks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_running_tasks_each_complete_once_through_a_killed_worker() {
    const TASKS: usize = 2000;
    let mut env = Env::new().await;
    // The default lease of production (not the tests' 2 s): the claim is
    // that only the killed worker's tasks run again, and with a 2 s lease
    // one stall of the loaded CI machine (a slow commit, a starved
    // process) ends a live session, whose tasks then rightly run again.
    env.start_service(&["--lease-duration", "15s"]);
    // Every task exists before a worker does, and runs a minute and a half:
    // they all start within the dispatch's ramp, before the first one ends,
    // even when the test starts beside the rest of the suite (it runs first).
    const RUNS_FOR: Duration = Duration::from_secs(90);
    // The ramp may take as long as it keeps going, short of the first
    // task's end; it has stalled when no task starts for this long.
    const RAMP_AT_MOST: Duration = Duration::from_secs(80);
    const RAMP_STALLED: Duration = Duration::from_secs(20);
    let client = env.client().await;
    let mut creating = tokio::task::JoinSet::new();
    for part in 0..8 {
        let mut client = client.clone();
        creating.spawn(async move {
            let mut ids = Vec::new();
            for _ in 0..TASKS / 8 {
                ids.push(
                    dispatch(
                        &mut client,
                        "noop",
                        json!({"ms": RUNS_FOR.as_millis() as u64}),
                        Some(3),
                    )
                    .await,
                );
            }
            (part, ids)
        });
    }
    let mut ids = Vec::new();
    while let Some(created) = creating.join_next().await {
        ids.extend(created.expect("creates").1);
    }
    let mut doomed = env.start_worker("doomed", "noop", None, &["--concurrency", "1000"]);
    let _survivor = env.start_worker("survivor", "noop", None, &["--concurrency", "1000"]);
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&env.database_url)
        .await
        .expect("database");
    // Running: claimed in its worker's session, or (a delivery that came
    // before the worker's session opened: the jobs wait in the queue when
    // it starts) on a lease the attempt renews itself.
    let running_on = |worker: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM tasks WHERE lease_owner = $1 AND lease_token IS NOT NULL \
                 AND status = 'working'",
            )
            .bind(worker)
            .fetch_one(&pool)
            .await
            .expect("count")
        }
    };
    let ramp_began = tokio::time::Instant::now();
    let (mut started, mut last_start) = (0, ramp_began);
    loop {
        let running = running_on("doomed").await + running_on("survivor").await;
        if running >= TASKS as i64 {
            break;
        }
        let now = tokio::time::Instant::now();
        if running > started {
            (started, last_start) = (running, now);
        }
        if now - ramp_began > RAMP_AT_MOST || now - last_start > RAMP_STALLED {
            let states: Vec<(Option<String>, bool, String, i64)> = sqlx::query_as(
                "SELECT lease_owner, lease_session IS NOT NULL, status, count(*) FROM tasks                  GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
            )
            .fetch_all(&pool)
            .await
            .expect("states");
            panic!(
                "not every task runs on a worker after {:?} ({started} did): {states:?}",
                now - ramp_began
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The sessions carry them: only the first deliveries, if any, beat them.
    let in_sessions: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM tasks WHERE lease_session IS NOT NULL AND status = 'working'",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    assert!(
        in_sessions >= (TASKS as i64) * 9 / 10,
        "only {in_sessions} of {TASKS} tasks run in their worker's session"
    );
    let held_by = |worker: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "SELECT task_id FROM tasks WHERE lease_owner = $1 AND lease_token IS NOT NULL \
                 ORDER BY task_id",
            )
            .bind(worker)
            .fetch_all(&pool)
            .await
            .expect("held")
        }
    };
    let lost = held_by("doomed").await;
    assert!(!lost.is_empty(), "the doomed worker runs some of them");
    doomed.kill_9();

    // The survivor's slots are all taken by its own tasks: the killed
    // worker's run again as those end, so the last ends two runs after the
    // kill (plus the session's lease and the reaper's pass).
    let all_done = RUNS_FOR * 2 + Duration::from_secs(60);
    let mut client = client.clone();
    for id in &ids {
        let done = result(&mut client, id, all_done).await;
        assert_eq!(done.status(), pb::TaskStatus::Completed, "{id}");
    }
    let again: Vec<String> =
        sqlx::query_scalar("SELECT task_id FROM tasks WHERE attempt = 2 ORDER BY task_id")
            .fetch_all(&pool)
            .await
            .expect("attempts");
    if again != lost {
        // Two thousand ids say nothing: name the differences and their
        // attempts (who ran them, how each ended).
        let extra: Vec<&String> = again.iter().filter(|id| !lost.contains(id)).collect();
        let missing: Vec<&String> = lost.iter().filter(|id| !again.contains(id)).collect();
        let mut told = Vec::new();
        for id in extra.iter().take(5).chain(missing.iter().take(5)) {
            let history: Option<String> =
                sqlx::query_scalar("SELECT attempt_history::text FROM tasks WHERE task_id = $1")
                    .bind(id.as_str())
                    .fetch_one(&pool)
                    .await
                    .expect("history");
            told.push(format!("{id}: {history:?}"));
        }
        panic!(
            "exactly the killed worker's {} tasks should run again: {} others did, {} of them \
             did not; some of them:\n{}",
            lost.len(),
            extra.len(),
            missing.len(),
            told.join("\n")
        );
    }
    let beyond: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE attempt > 2")
        .fetch_one(&pool)
        .await
        .expect("attempts");
    assert_eq!(beyond, 0, "no task ran a third time");
    env.cleanup(&["noop"]).await;
}
