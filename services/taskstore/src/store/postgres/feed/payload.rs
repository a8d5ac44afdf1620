//! The payload of a task-change notification (migrations 0002, 0003,
//! 0012, 0015, 0026), read into a change-feed event: the task itself when
//! the payload carries it, else what there is of it; a result it carries;
//! and the schema it was made in.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::domain::{ProgressToken, SessionId, Task, TaskId, TaskStatus, ToolName, Ttl};
use crate::store::changes::{ChangedTask, News, TaskChange};

/// The JSON line of a 0012 payload (see the migration for the keys).
#[derive(Debug, Deserialize)]
struct Body {
    m: Option<String>,
    c: i64,
    u: i64,
    t: Option<i64>,
    p: i64,
    s: Option<String>,
    o: Option<String>,
    k: Option<String>,
    /// The result of a task that ended with one, when it fit (0015).
    r: Option<String>,
    /// The schema the change was made in (0026).
    n: Option<String>,
}

/// What is left of a body that does not carry the task: where it was made.
#[derive(Debug, Deserialize)]
struct Origin {
    n: Option<String>,
}

/// A task-change notification read: the event, and the result of a task
/// that ended with one when the payload carried it (JSON text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Notification {
    pub change: TaskChange,
    pub result: Option<String>,
    /// The schema the change was made in; `None` from a trigger before
    /// 0026 (heard by every schema).
    pub schema: Option<String>,
}

impl Notification {
    /// Whether a listener in `schema` should hear it.
    pub fn is_for(&self, schema: &str) -> bool {
        self.schema
            .as_deref()
            .is_none_or(|made_in| made_in == schema)
    }
}

/// "<tenant> <task id> <status>" and, from 0012, a newline and the task as
/// JSON. Older payloads ("<tenant> <task id>", 0002), a status this build
/// does not know, and a body it cannot read leave the rest for the watcher
/// to read. `None`: not a task change at all.
pub(super) fn parse_notification(payload: &str) -> Option<Notification> {
    let (head, body) = match payload.split_once('\n') {
        Some((head, body)) => (head, Some(body)),
        None => (payload, None),
    };
    let mut parts = head.splitn(3, ' ');
    let (tenant, task_id) = (parts.next()?, parts.next()?);
    if tenant.is_empty() || task_id.is_empty() {
        return None;
    }
    let status: Option<TaskStatus> = parts.next().and_then(|status| status.parse().ok());
    let (news, result, schema) = match (status, body) {
        (Some(status), Some(body)) => match changed_task(task_id, status, body) {
            Some((changed, result, schema)) => (News::Task(Arc::new(changed)), result, schema),
            None => (News::Status(status), None, origin(body)),
        },
        (Some(status), None) => (News::Status(status), None, None),
        (None, body) => (News::Unknown, None, body.and_then(origin)),
    };
    Some(Notification {
        change: TaskChange::Changed {
            tenant: tenant.to_owned(),
            task_id: task_id.to_owned(),
            news,
        },
        result,
        schema,
    })
}

/// The schema a body names, when it says nothing else this build reads.
fn origin(body: &str) -> Option<String> {
    serde_json::from_str::<Origin>(body).ok()?.n
}

/// The task a body describes, converted as a row is (`rows.rs`), so that
/// it equals what a read would return.
fn changed_task(
    task_id: &str,
    status: TaskStatus,
    body: &str,
) -> Option<(ChangedTask, Option<String>, Option<String>)> {
    let body: Body = serde_json::from_str(body).ok()?;
    let ttl = match body.t {
        Some(ms) => Some(Ttl::from_millis(u64::try_from(ms).ok()?).ok()?),
        None => None,
    };
    let task = Task {
        task_id: TaskId::parse(task_id).ok()?,
        status,
        status_message: body.m,
        created_at: DateTime::<Utc>::from_timestamp_micros(body.c)?,
        last_updated_at: DateTime::<Utc>::from_timestamp_micros(body.u)?,
        ttl,
        poll_interval: Duration::from_millis(u64::try_from(body.p).ok()?),
        session_id: match body.s {
            Some(session) => Some(SessionId::parse(&session, usize::MAX).ok()?),
            None => None,
        },
        tool: match body.o {
            Some(tool) => Some(ToolName::parse(&tool).ok()?),
            None => None,
        },
    };
    let changed = ChangedTask {
        task,
        progress_token: body.k.as_deref().and_then(ProgressToken::from_stored),
    };
    Some((changed, body.r, body.n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_task_change(payload: &str) -> Option<TaskChange> {
        parse_notification(payload).map(|notification| notification.change)
    }

    fn news(payload: &str) -> Option<News> {
        match parse_task_change(payload)? {
            TaskChange::Changed { news, .. } => Some(news),
            TaskChange::Resync => None,
        }
    }

    #[test]
    fn payloads_of_every_migration() {
        assert_eq!(
            parse_task_change("default t1 completed"),
            Some(TaskChange::Changed {
                tenant: "default".into(),
                task_id: "t1".into(),
                news: News::Status(TaskStatus::Completed)
            })
        );
        assert_eq!(news("default t1"), Some(News::Unknown));
        // A status from a newer schema: read the task instead of guessing.
        assert_eq!(news("default t1 archived"), Some(News::Unknown));
        assert_eq!(news("default t1 archived\n{}"), Some(News::Unknown));
        assert_eq!(parse_task_change("default"), None);
        assert_eq!(parse_task_change(" t1"), None);
        assert_eq!(parse_task_change(""), None);
    }

    #[test]
    fn a_full_payload_is_the_task() {
        let payload = "acme t1 working\n{\"m\":\"copying (3/10)\",\"c\":1764000000000001,\"u\":1764000000500002,\"t\":60000,\"p\":1000,\"s\":\"s1\",\"o\":\"sleep\",\"k\":\"\\\"tok\\\"\"}";
        let Some(News::Task(changed)) = news(payload) else {
            panic!("the task: {:?}", news(payload));
        };
        let task = &changed.task;
        assert_eq!(task.task_id.as_str(), "t1");
        assert_eq!(task.status, TaskStatus::Working);
        assert_eq!(task.status_message.as_deref(), Some("copying (3/10)"));
        assert_eq!(task.created_at.timestamp_micros(), 1_764_000_000_000_001);
        assert_eq!(
            task.last_updated_at.timestamp_micros(),
            1_764_000_000_500_002
        );
        assert_eq!(task.ttl.map(|t| t.as_millis()), Some(60_000));
        assert_eq!(task.poll_interval, Duration::from_millis(1000));
        assert_eq!(task.session_id.as_ref().map(|s| s.as_str()), Some("s1"));
        assert_eq!(task.tool.as_ref().map(|t| t.as_str()), Some("sleep"));
        assert_eq!(
            changed.progress_token.as_ref().map(ProgressToken::as_str),
            Some("\"tok\"")
        );

        let bare = "acme t1 completed\n{\"m\":null,\"c\":1,\"u\":2,\"t\":null,\"p\":5,\"s\":null,\"o\":null,\"k\":null}";
        let Some(News::Task(changed)) = news(bare) else {
            panic!("the task");
        };
        assert_eq!(changed.task.ttl, None);
        assert_eq!(changed.task.session_id, None);
        assert_eq!(changed.progress_token, None);
    }

    #[test]
    fn a_terminal_payload_may_carry_the_result() {
        let payload = "acme t1 completed\n{\"m\":null,\"c\":1,\"u\":2,\"t\":null,\"p\":5,\"s\":null,\"o\":null,\"k\":null,\"r\":\"{\\\"content\\\":[]}\"}";
        let notification = parse_notification(payload).expect("a change");
        assert_eq!(notification.result.as_deref(), Some(r#"{"content":[]}"#));
        assert!(matches!(
            notification.change,
            TaskChange::Changed {
                news: News::Task(_),
                ..
            }
        ));
        let without = "acme t1 working\n{\"m\":null,\"c\":1,\"u\":2,\"t\":null,\"p\":5,\"s\":null,\"o\":null,\"k\":null}";
        assert_eq!(parse_notification(without).expect("a change").result, None);
    }

    #[test]
    fn a_change_is_heard_in_the_schema_it_names_or_everywhere_without_one() {
        let full = "acme t1 working\n{\"m\":null,\"c\":1,\"u\":2,\"t\":null,\"p\":5,\"s\":null,\"o\":null,\"k\":null,\"n\":\"deploy_a\"}";
        let oversize = "acme t1 working\n{\"x\":true,\"n\":\"deploy_a\"}";
        let unknown_status = "acme t1 archived\n{\"n\":\"deploy_a\"}";
        for payload in [full, oversize, unknown_status] {
            let notification = parse_notification(payload).expect("a change");
            assert_eq!(
                notification.schema.as_deref(),
                Some("deploy_a"),
                "{payload}"
            );
            assert!(notification.is_for("deploy_a"), "{payload}");
            assert!(!notification.is_for("deploy_b"), "{payload}");
        }
        for older in ["acme t1 working", "acme t1 working\n{\"x\":true}"] {
            let notification = parse_notification(older).expect("a change");
            assert!(notification.is_for("deploy_b"), "{older}");
        }
    }

    #[test]
    fn an_oversize_or_unreadable_body_leaves_the_status() {
        for body in [
            "{\"x\":true}",
            "not json",
            "{\"c\":1}",
            "{\"m\":null,\"c\":1,\"u\":2,\"t\":-5,\"p\":5}",
        ] {
            assert_eq!(
                news(&format!("acme t1 failed\n{body}")),
                Some(News::Status(TaskStatus::Failed)),
                "{body}"
            );
        }
    }
}
