//! The calls of the cross-tenant probe (`probe.rs`): every RPC an intruder
//! can make about another tenant's task, and the same calls about a task
//! that never existed, to compare their answers.

use std::time::Duration;

use tonic::Status;

use super::*;

/// What one probe call came to: its error, or what its answer said.
pub(super) type Outcome = Result<String, Status>;

/// A's tasks as A sees them, for the before/after comparison.
pub(super) async fn snapshot(
    owner: &mut Identity,
    ids: &[(String, Option<String>)],
) -> Vec<pb::Task> {
    let mut tasks = Vec::new();
    for (id, session) in ids {
        let task = owner
            .store
            .get_task(pb::GetTaskRequest {
                task_id: id.clone(),
                session_id: session.clone(),
            })
            .await
            .expect("the owner sees its task")
            .into_inner();
        tasks.push(task);
    }
    tasks
}

/// Every call an intruder can make about task `id` (whose lease is
/// `lease`, whose tenant is `victim`), labelled.
pub(super) async fn calls(
    intruder: &mut Identity,
    victim: &str,
    id: &str,
    session: Option<&str>,
    lease: &str,
    cursor: &str,
) -> Vec<(String, Outcome)> {
    let session = session.map(str::to_owned);
    let mut out: Vec<(String, Outcome)> = Vec::new();
    for name_tenant in [false, true] {
        let wrap = |label: &str| format!("{label} (naming tenant: {name_tenant})");
        macro_rules! req {
            ($message:expr) => {
                if name_tenant {
                    naming(victim, $message)
                } else {
                    tonic::Request::new($message)
                }
            };
        }
        let get = pb::GetTaskRequest {
            task_id: id.into(),
            session_id: session.clone(),
        };
        out.push((
            wrap("GetTask"),
            intruder
                .store
                .get_task(req!(get.clone()))
                .await
                .map(|r| format!("{r:?}")),
        ));
        out.push((
            wrap("GetTaskExecution"),
            intruder
                .store
                .get_task_execution(req!(get))
                .await
                .map(|r| format!("{r:?}")),
        ));
        for wait in [false, true] {
            let mut request = req!(pb::GetTaskResultRequest {
                task_id: id.into(),
                session_id: session.clone(),
                wait,
            });
            request.set_timeout(Duration::from_millis(300));
            let outcome = intruder
                .store
                .get_task_result(request)
                .await
                .map(|r| format!("{r:?}"));
            out.push((wrap(&format!("GetTaskResult wait={wait}")), outcome));
        }
        let watch = intruder
            .store
            .watch_task(req!(pb::WatchTaskRequest {
                lease_token: None,
                task_id: id.into(),
                session_id: session.clone(),
            }))
            .await;
        let watched = match watch {
            Ok(stream) => {
                let mut stream = stream.into_inner();
                match tokio::time::timeout(Duration::from_secs(2), stream.message()).await {
                    Ok(Ok(Some(task))) => Ok(format!("{task:?}")),
                    Ok(Ok(None)) => Err(Status::not_found("the stream ended empty")),
                    Ok(Err(status)) => Err(status),
                    Err(_) => Err(Status::not_found("the stream stayed silent")),
                }
            }
            Err(status) => Err(status),
        };
        out.push((wrap("WatchTask"), watched));
        let update = pb::UpdateTaskStatusRequest {
            task_id: id.into(),
            status: pb::TaskStatus::InputRequired.into(),
            status_message: Some("intruder".into()),
            session_id: session.clone(),
            lease_token: None,
        };
        out.push((
            wrap("UpdateTaskStatus"),
            intruder
                .store
                .update_task_status(req!(update))
                .await
                .map(|r| format!("{r:?}")),
        ));
        for lease_token in [None, Some(lease.to_owned())] {
            let store = pb::StoreTaskResultRequest {
                task_id: id.into(),
                status: pb::TaskStatus::Completed.into(),
                result_json: r#"{"content":[]}"#.into(),
                session_id: session.clone(),
                status_message: None,
                lease_token,
            };
            out.push((
                wrap("StoreTaskResult"),
                intruder
                    .store
                    .store_task_result(req!(store))
                    .await
                    .map(|r| format!("{r:?}")),
            ));
        }
        // Holding: a first hold, and a renewal with the stolen lease.
        for token in ["", lease] {
            let hold = pb::HoldTaskRequest {
                task_id: id.into(),
                session_id: session.clone(),
                holder: "intruder".into(),
                lease_token: token.into(),
            };
            out.push((
                wrap(&format!("HoldTask (lease: {})", !token.is_empty())),
                intruder
                    .store
                    .hold_task(req!(hold))
                    .await
                    .map(|r| format!("{r:?}")),
            ));
        }
        let listed = pb::ListInputRequestsRequest {
            task_id: id.into(),
            session_id: session.clone(),
        };
        out.push((
            wrap("ListInputRequests"),
            intruder
                .store
                .list_input_requests(req!(listed))
                .await
                .map(|r| format!("{r:?}")),
        ));
        let answer = pb::AnswerInputRequestsRequest {
            task_id: id.into(),
            session_id: session.clone(),
            answers_json: [("probe".to_owned(), r#"{"action":"accept"}"#.to_owned())].into(),
        };
        out.push((
            wrap("AnswerInputRequests"),
            intruder
                .store
                .answer_input_requests(req!(answer))
                .await
                .map(|r| format!("{r:?}")),
        ));
        let cancel = pb::CancelTaskRequest {
            task_id: id.into(),
            session_id: session.clone(),
        };
        out.push((
            wrap("CancelTask"),
            intruder
                .store
                .cancel_task(req!(cancel))
                .await
                .map(|r| format!("{r:?}")),
        ));
        let delete = pb::DeleteTaskRequest {
            task_id: id.into(),
            session_id: session.clone(),
        };
        out.push((
            wrap("DeleteTask"),
            intruder
                .store
                .delete_task(req!(delete))
                .await
                .map(|r| format!("{r:?}")),
        ));
        let list = pb::ListTasksRequest {
            cursor: Some(cursor.to_owned()),
            page_size: None,
            session_id: session.clone(),
            statuses: Vec::new(),
            tool: None,
        };
        out.push((
            wrap("ListTasks with the victim's cursor"),
            intruder
                .store
                .list_tasks(req!(list))
                .await
                .map(|r| format!("{r:?}")),
        ));
        for tenant_id in ["", victim] {
            let claim = pb::ClaimTaskRequest {
                task_id: id.into(),
                generation: 1,
                worker_id: "intruder".into(),
                tenant_id: tenant_id.into(),
                ..Default::default()
            };
            out.push((
                wrap(&format!("ClaimTask tenant={tenant_id:?}")),
                intruder
                    .execution
                    .claim_task(req!(claim))
                    .await
                    .map(|r| format!("{r:?}")),
            ));
            let renew = pb::RenewLeaseRequest {
                task_id: id.into(),
                lease_token: lease.into(),
                tenant_id: tenant_id.into(),
            };
            out.push((
                wrap(&format!("RenewLease tenant={tenant_id:?}")),
                intruder
                    .execution
                    .renew_lease(req!(renew))
                    .await
                    .map(|r| format!("{:?}", r.into_inner())),
            ));
            let ask = pb::AskQuestionRequest {
                task_id: id.into(),
                lease_token: lease.into(),
                tenant_id: tenant_id.into(),
                key: "probe".into(),
                request_json: r#"{"method":"roots/list"}"#.into(),
            };
            out.push((
                wrap(&format!("AskQuestion tenant={tenant_id:?}")),
                intruder
                    .execution
                    .ask_question(req!(ask))
                    .await
                    .map(|r| format!("{r:?}")),
            ));
            let release = pb::ReleaseTaskRequest {
                back_off_until: None,
                task_id: id.into(),
                lease_token: lease.into(),
                reason: pb::ReleaseReason::RetryableError.into(),
                message: "intruder".into(),
                tenant_id: tenant_id.into(),
            };
            out.push((
                wrap(&format!("ReleaseTask tenant={tenant_id:?}")),
                intruder
                    .execution
                    .release_task(req!(release))
                    .await
                    .map(|r| format!("{r:?}")),
            ));
        }
    }
    out
}

/// The message an identity gets for a task that never existed, by call.
pub(super) async fn never_existed(intruder: &mut Identity, victim: &str) -> Vec<(String, Outcome)> {
    calls(
        intruder,
        victim,
        "no-such-task-anywhere",
        None,
        "0000",
        "bm90LWEtY3Vyc29y",
    )
    .await
}
