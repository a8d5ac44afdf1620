//! Tenants side by side on two replicas (issue 37, defects 7 and 8): waiting
//! calls of many tenants never fail for the bookkeeping of who listens,
//! whatever other calls are cancelled meanwhile, and `serve` stops within
//! its shutdown deadline even while the database holds its statements.

use std::time::{Duration, Instant};

use serde_json::json;
use taskstore_proto::v1 as pb;
use tonic::transport::Channel;

use crate::common::{Env, dispatch_request};
use pb::task_store_client::TaskStoreClient;

fn in_tenant<T>(tenant: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("x-taskstore-tenant", tenant.parse().expect("ascii"));
    request
}

async fn create(client: &mut TaskStoreClient<Channel>, tenant: &str, ms: u64) -> String {
    let request = dispatch_request("sleep", json!({ "ms": ms }), None);
    client
        .create_task(in_tenant(tenant, request))
        .await
        .unwrap_or_else(|status| panic!("create in {tenant}: {status:?}"))
        .into_inner()
        .task_id
}

async fn wait_for(
    client: &mut TaskStoreClient<Channel>,
    tenant: &str,
    task_id: &str,
    deadline: Duration,
) -> Result<pb::GetTaskResultResponse, tonic::Status> {
    let mut request = in_tenant(
        tenant,
        pb::GetTaskResultRequest {
            task_id: task_id.to_owned(),
            session_id: None,
            wait: true,
        },
    );
    request.set_timeout(deadline);
    client
        .get_task_result(request)
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenants_waiting_side_by_side_on_two_replicas_never_fail() {
    let mut first = Env::new().await;
    first.start_service(&[]);
    let mut second = first.sibling();
    second.start_service(&[]);
    let _a = first.start_worker("worker-a", "sleep", None, &[]);
    let _b = second.start_worker("worker-b", "sleep", None, &[]);
    first.wait_for_consumers("sleep", 2).await;
    let clients = [first.client().await, second.client().await];

    // A flood in one tenant, through the first replica.
    let mut noisy = clients[0].clone();
    for _ in 0..400 {
        create(&mut noisy, "noisy", 40).await;
    }
    // Impatient callers of new tenants hang up at every moment of their
    // first wait (each registers its tenant with the change feed). They
    // are other clients, on connections of their own (a server answers a
    // connection that resets many streams at once with GOAWAY).
    let impatient_clients = [first.client().await, second.client().await];
    let mut impatient = Vec::new();
    for caller in 0..120u64 {
        let mut client = impatient_clients[(caller % 2) as usize].clone();
        impatient.push(tokio::spawn(async move {
            let tenant = format!("impatient-{caller}");
            let deadline = Duration::from_micros(500 + (caller * 37) % 3_000);
            let _ = wait_for(&mut client, &tenant, "never-created", deadline).await;
        }));
    }
    // Meanwhile tenants wait on their own tasks, on both replicas.
    let mut waiting = Vec::new();
    for tenant in 0..6usize {
        for task in 0..3usize {
            let mut creator = clients[(tenant + task) % 2].clone();
            let mut waiter = clients[(tenant + task + 1) % 2].clone();
            waiting.push(tokio::spawn(async move {
                let tenant = format!("quiet-{tenant}");
                let task_id = create(&mut creator, &tenant, 10).await;
                let outcome =
                    wait_for(&mut waiter, &tenant, &task_id, Duration::from_secs(90)).await;
                (tenant, task_id, outcome)
            }));
        }
    }
    for caller in impatient {
        caller.await.expect("impatient caller");
    }
    for waiter in waiting {
        let (tenant, task_id, outcome) = waiter.await.expect("waiter");
        let response = outcome
            .unwrap_or_else(|status| panic!("{tenant}'s wait on {task_id} failed: {status:?}"));
        assert_eq!(
            response.status(),
            pb::TaskStatus::Completed,
            "{tenant}'s task {task_id}"
        );
    }
    for env in [&first, &second] {
        let logs = env.service_logs.lock().expect("logs").clone();
        // sqlx logs PostgreSQL's notices: a BEGIN inside a transaction, a
        // COMMIT or ROLLBACK outside one, a deadlock.
        let stale = logs
            .iter()
            .find(|line| line.contains("transaction in progress") || line.contains("deadlock"));
        assert!(
            stale.is_none(),
            "a connection's transaction went astray: {stale:?}"
        );
    }
    first.cleanup(&["sleep"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_stops_by_its_deadline_while_the_database_holds_its_statements() {
    let mut env = Env::new().await;
    env.start_service(&["--shutdown-grace", "2s"]);
    let mut client = env.client().await;
    create(&mut client, "default", 10).await;

    // Every statement on the tasks table now waits, as it would behind a
    // stuck migration or a database that stopped answering.
    let locker = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&env.database_url)
        .await
        .expect("connect to PostgreSQL");
    let mut holding = locker.acquire().await.expect("connection");
    sqlx::query("BEGIN")
        .execute(&mut *holding)
        .await
        .expect("begin");
    sqlx::query("LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *holding)
        .await
        .expect("lock the tasks table");
    let mut stuck = Vec::new();
    for _ in 0..4 {
        let mut client = client.clone();
        stuck.push(tokio::spawn(async move {
            let request = dispatch_request("sleep", json!({ "ms": 10 }), None);
            let _ = client.create_task(request).await;
        }));
    }
    // The reaper's and the relay's next passes wait on the lock too.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let service = env.service.as_mut().expect("service");
    let signalled = Instant::now();
    service.signal("-TERM");
    let status = service.wait_exit(Duration::from_secs(15));
    let took = signalled.elapsed();
    sqlx::query("ROLLBACK")
        .execute(&mut *holding)
        .await
        .expect("release the lock");
    drop(holding);
    locker.close().await;
    for call in stuck {
        let _ = call.await;
    }
    // The grace (2 s) and a second of last words for each phase that
    // outlived it.
    assert!(
        took < Duration::from_secs(6),
        "serve took {took:?} to stop after SIGTERM ({status})"
    );
    env.cleanup(&["sleep"]).await;
}
