//! PostgreSQL is the truth, the broker a transport (issue 40, item 9): jobs
//! waiting in a tool's queue are lost with it when an operator deletes the
//! queue, and every task still completes, once. A worker holding jobs it
//! had not started is SIGKILLed first (the broker takes its unacknowledged
//! deliveries back into the queue), then the queue goes with what it held;
//! a new worker declares the queue again, the service publishes the lost
//! jobs again (`--republish-after`), and the killed worker's running tasks
//! come back through their expired leases.

use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::postgres::PgPoolOptions;

use crate::common::{Env, amqp_url, dispatch, eventually, is_running};

const TASKS: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_a_deleted_queue_lost_are_published_again_and_run_once() {
    let mut env = Env::new().await;
    env.start_service(&["--republish-after", "1s"]);
    let mut doomed = env.start_worker("worker-lost-1", "sleep", None, &[]);
    env.wait_for_consumers("sleep", 1).await;
    let mut client = env.client().await;
    let mut ids = Vec::new();
    for _ in 0..TASKS {
        ids.push(dispatch(&mut client, "sleep", json!({"ms": 1500}), None).await);
    }
    // Its four slots busy, and the jobs it prefetched for them waiting.
    eventually(
        "the worker runs four tasks",
        Duration::from_secs(20),
        || {
            let mut client = client.clone();
            let ids = ids.clone();
            async move {
                let mut running = 0;
                for id in &ids {
                    running += usize::from(is_running(&mut client, id).await);
                }
                running == 4
            }
        },
    )
    .await;
    let mut was_running = Vec::new();
    for id in &ids {
        if is_running(&mut client, id).await {
            was_running.push(id.clone());
        }
    }
    doomed.kill_9();

    // The queue goes, with every job in it.
    let connection =
        lapin::Connection::connect(&amqp_url(), lapin::ConnectionProperties::default())
            .await
            .expect("rabbitmq");
    let channel = connection.create_channel().await.expect("channel");
    let queue = format!("{}.tool.sleep", env.prefix);
    let mut lost = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while lost == 0 {
        // The killed worker's deliveries come back to the queue once the
        // broker notices the closed connection.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let probe = connection.create_channel().await.expect("channel");
        let depth = probe
            .queue_declare(
                queue.as_str().into(),
                lapin::options::QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                lapin::types::FieldTable::default(),
            )
            .await
            .expect("the tool's queue")
            .message_count();
        if depth > 0 || tokio::time::Instant::now() > deadline {
            lost = channel
                .queue_delete(
                    queue.as_str().into(),
                    lapin::options::QueueDeleteOptions::default(),
                )
                .await
                .expect("delete the queue");
        }
    }
    let _ = connection.close(200, "deleted".into()).await;
    assert!(lost > 0, "the deleted queue held no job");
    eprintln!("{lost} jobs lost with the queue");

    let _worker = env.start_worker("worker-lost-2", "sleep", None, &[]);
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&env.database_url)
        .await
        .expect("PostgreSQL");
    let rows = || async {
        sqlx::query_as::<_, (String, String, i32)>(
            "SELECT task_id, status, attempt FROM tasks WHERE task_id = ANY($1) ORDER BY task_id",
        )
        .bind(&ids)
        .fetch_all(&pool)
        .await
        .expect("tasks")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tasks = rows().await;
        if tasks.iter().all(|(_, status, _)| status == "completed") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every task completed ({lost} jobs lost with the queue): {tasks:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Once each: a task ran a second attempt only if the killed worker was
    // running it; a lost job's copies were claimed once between them.
    for (id, _, attempts) in rows().await {
        let expected = if was_running.contains(&id) { 2 } else { 1 };
        assert_eq!(
            attempts, expected,
            "task {id} ran {attempts} attempts ({lost} jobs lost with the queue)"
        );
    }
    env.cleanup(&["sleep"]).await;
}
