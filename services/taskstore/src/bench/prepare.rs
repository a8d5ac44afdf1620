//! What a run makes before it measures: the tasks that `get`, `list` and
//! `watch` read.

use std::sync::Arc;

use taskstore_proto::v1 as pb;

use super::{BenchError, Scenario, Shared};

/// What `prepare` made before measuring (the task ids for `get`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Prepared {
    pub task_ids: Arc<Vec<String>>,
    /// `get --seeded`: read `bench-1` … `bench-<seeded>` instead.
    pub seeded: u64,
    /// `watch`: the first this many of `task_ids` have a stream open.
    pub watched: usize,
}

pub(crate) fn create_request(tool: Option<&str>, index: u64) -> pb::CreateTaskRequest {
    create_request_with(tool, index, serde_json::json!({ "n": index }))
}

pub(crate) fn create_request_with(
    tool: Option<&str>,
    index: u64,
    arguments: serde_json::Value,
) -> pb::CreateTaskRequest {
    let request = serde_json::json!({
        "jsonrpc": "2.0", "id": index, "method": "tools/call",
        "params": { "name": tool.unwrap_or("bench"), "arguments": arguments },
    });
    pb::CreateTaskRequest {
        task_id: None,
        session_id: None,
        ttl: None,
        request_id_json: index.to_string(),
        request_json: request.to_string(),
        dispatch: tool.map(|_| pb::Dispatch {
            priority: Default::default(),
            start_at: None,
            start_after: None,
            tool: None,
            max_attempts: None,
        }),
        no_expiry: false,
        poll_interval: None,
        idempotency_key: None,
    }
}

/// Creates the tasks `get` and `list` read, with every client at once.
pub(crate) async fn prepare(shared: &Shared) -> Result<Prepared, BenchError> {
    if !matches!(
        shared.args.scenario,
        Scenario::Get | Scenario::List | Scenario::Watch
    ) {
        return Ok(Prepared::default());
    }
    if let (Scenario::Get, Some(seeded)) = (shared.args.scenario, shared.args.seeded) {
        return Ok(Prepared {
            task_ids: Arc::new(Vec::new()),
            seeded,
            watched: 0,
        });
    }
    let total = shared.args.tasks;
    let clients = shared.args.clients.max(1) as u64;
    eprintln!("[bench] creating {total} tasks first");
    let mut creators = tokio::task::JoinSet::new();
    for index in 0..clients {
        let mut client = shared.client(index as usize);
        creators.spawn(async move {
            let mut ids = Vec::new();
            let mut n = index;
            while n < total {
                let task = client
                    .create_task(create_request(None, n))
                    .await?
                    .into_inner();
                ids.push(task.task_id);
                n += clients;
            }
            Ok::<_, BenchError>(ids)
        });
    }
    let mut ids = Vec::new();
    for created in creators.join_all().await {
        ids.extend(created?);
    }
    Ok(Prepared {
        seeded: 0,
        watched: if shared.args.scenario == Scenario::Watch {
            shared.args.watchers.min(ids.len())
        } else {
            0
        },
        task_ids: Arc::new(ids),
    })
}
