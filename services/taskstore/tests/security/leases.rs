//! Reports and a worker's reads are fenced by the lease of the attempt
//! that runs the task (issue 37, defect 2): every role × lease (absent, the
//! task's own, another task's) × task (its caller's own, queued for the
//! fleet, running on a worker, held by its caller through HoldTask), for
//! progress, the result and a worker's watch. What is refused changes
//! nothing.

use taskstore::domain::Role;
use tonic::Code;

use super::*;

/// What the task is when the report arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// Created without dispatch; its caller runs it and reports on it.
    Own,
    /// Dispatched, no worker has claimed it yet.
    Queued,
    /// Claimed by a fleet worker.
    Running,
    /// Held by its caller through HoldTask.
    ByItsCaller,
}

/// Which lease the report carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lease {
    Absent,
    /// The lease of the attempt that runs the task.
    Its,
    /// A live lease of another task.
    Foreign,
}

/// What the rules say (`domain::Fence`, `access::acts_only_through_its_attempt`).
fn expected(role: Role, held: Held, lease: Lease) -> Code {
    match (role, lease) {
        (Role::Worker, Lease::Absent) => Code::PermissionDenied,
        (_, Lease::Its) => Code::Ok,
        (_, Lease::Foreign) => Code::FailedPrecondition,
        (_, Lease::Absent) if held == Held::Own => Code::Ok,
        (_, Lease::Absent) => Code::FailedPrecondition,
    }
}

struct Scene {
    owner: Identity,
    fleet: Identity,
    next: u32,
}

impl Scene {
    /// A new task of acme in state `held`, and the lease running it.
    async fn task(&mut self, held: Held) -> (String, Option<String>) {
        self.next += 1;
        let id = format!("lease-{}-{:?}", self.next, held).to_lowercase();
        let dispatch = matches!(held, Held::Queued | Held::Running);
        self.owner
            .store
            .create_task(create(Some(&id), None, dispatch))
            .await
            .expect("create");
        let lease = match held {
            Held::Own | Held::Queued => None,
            Held::Running => Some(
                self.fleet
                    .execution
                    .claim_task(pb::ClaimTaskRequest {
                        task_id: id.clone(),
                        generation: 1,
                        worker_id: "fleet".into(),
                        tenant_id: "acme".into(),
                        ..Default::default()
                    })
                    .await
                    .expect("claim")
                    .into_inner()
                    .lease_token,
            ),
            Held::ByItsCaller => Some(
                self.owner
                    .store
                    .hold_task(pb::HoldTaskRequest {
                        task_id: id.clone(),
                        session_id: None,
                        holder: "an sdk server".into(),
                        lease_token: String::new(),
                    })
                    .await
                    .expect("hold")
                    .into_inner()
                    .lease_token,
            ),
        };
        (id, lease)
    }

    async fn seen(&mut self, id: &str) -> pb::Task {
        self.owner
            .store
            .get_task(pb::GetTaskRequest {
                task_id: id.to_owned(),
                session_id: None,
            })
            .await
            .expect("the owner reads its task")
            .into_inner()
    }
}

/// The three calls, by `who`, on `id`, carrying `lease`.
async fn report(
    who: &mut Identity,
    call: &str,
    id: &str,
    lease: Option<String>,
) -> Result<(), tonic::Status> {
    match call {
        "UpdateTaskStatus" => who
            .store
            .update_task_status(naming(
                "acme",
                pb::UpdateTaskStatusRequest {
                    task_id: id.to_owned(),
                    status: pb::TaskStatus::Working.into(),
                    status_message: Some("forged progress".into()),
                    session_id: None,
                    lease_token: lease,
                },
            ))
            .await
            .map(|_| ()),
        "StoreTaskResult" => who
            .store
            .store_task_result(naming(
                "acme",
                pb::StoreTaskResultRequest {
                    task_id: id.to_owned(),
                    status: pb::TaskStatus::Completed.into(),
                    result_json: r#"{"content":[{"type":"text","text":"forged"}]}"#.into(),
                    session_id: None,
                    status_message: Some("forged result".into()),
                    lease_token: lease,
                },
            ))
            .await
            .map(|_| ()),
        _ => who
            .store
            .watch_task(naming(
                "acme",
                pb::WatchTaskRequest {
                    task_id: id.to_owned(),
                    session_id: None,
                    lease_token: lease,
                },
            ))
            .await
            .map(|_| ()),
    }
}

async fn every_role_lease_and_task(kind: Kind) {
    let world = World::new(kind).await;
    let owner = world
        .identity(Some(&world.key("acme", Role::Client).await))
        .await;
    let fleet = world
        .identity(Some(&world.key("*", Role::Worker).await))
        .await;
    let mut scene = Scene {
        owner,
        fleet: fleet.clone(),
        next: 0,
    };
    let callers = [
        (
            "client of acme",
            Role::Client,
            world.key("acme", Role::Client).await,
        ),
        (
            "admin of acme",
            Role::Admin,
            world.key("acme", Role::Admin).await,
        ),
        (
            "admin of every tenant",
            Role::Admin,
            world.key("*", Role::Admin).await,
        ),
        (
            "worker of acme",
            Role::Worker,
            world.key("acme", Role::Worker).await,
        ),
        (
            "fleet worker",
            Role::Worker,
            world.key("*", Role::Worker).await,
        ),
    ];
    // A live lease of another task, to carry where it does not belong.
    let (_, foreign) = scene.task(Held::Running).await;
    let foreign = foreign.expect("a running task has a lease");

    for (who, role, key) in &callers {
        let mut caller = world.identity(Some(key)).await;
        for held in [Held::Own, Held::Queued, Held::Running, Held::ByItsCaller] {
            for lease in [Lease::Absent, Lease::Its, Lease::Foreign] {
                for call in ["UpdateTaskStatus", "StoreTaskResult", "WatchTask"] {
                    if call == "WatchTask" && *role != Role::Worker {
                        continue; // a watch is a client's read: not fenced
                    }
                    let (id, its) = scene.task(held).await;
                    let carried = match lease {
                        Lease::Absent => None,
                        Lease::Its => match its {
                            Some(its) => Some(its),
                            None => continue, // nothing runs it: no lease
                        },
                        Lease::Foreign => Some(foreign.clone()),
                    };
                    let before = scene.seen(&id).await;
                    let outcome = report(&mut caller, call, &id, carried).await;
                    let code = outcome.as_ref().map_or_else(|s| s.code(), |()| Code::Ok);
                    let want = expected(*role, held, lease);
                    assert_eq!(
                        code, want,
                        "{who}, {call} on a {held:?} task, lease {lease:?}: {outcome:?}"
                    );
                    if code != Code::Ok {
                        let after = scene.seen(&id).await;
                        assert_eq!(
                            (after.status, &after.status_message),
                            (before.status, &before.status_message),
                            "{who}, refused {call} on a {held:?} task changed it"
                        );
                    }
                }
            }
        }
    }
}

macro_rules! on_every_backend {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test] async fn $case() { super::$case(super::Kind::Memory).await })*
        }
        mod sqlite {
            $(#[tokio::test] async fn $case() { super::$case(super::Kind::Sqlite).await })*
        }
        mod postgres {
            $(#[tokio::test] async fn $case() { super::$case(super::Kind::Postgres).await })*
        }
    };
}

on_every_backend!(every_role_lease_and_task);
