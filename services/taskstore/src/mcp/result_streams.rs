//! The `tasks/result` streams open on this replica, by session and task:
//! a change of a task whose result a session waits for here goes out once,
//! on that stream, and the session's `GET` stream leaves it out (2025-11-25
//! clients would otherwise see each change twice). A session whose two
//! streams reach different replicas may still see both: each replica knows
//! only its own streams.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::domain::{Scope, TaskId};

type Key = (String, Option<String>, String);

#[derive(Debug, Default)]
pub(crate) struct ResultStreams {
    open: Arc<Mutex<HashMap<Key, usize>>>,
}

fn key(scope: &Scope, task: &TaskId) -> Key {
    (
        scope.tenant.as_str().to_owned(),
        scope.session.as_ref().map(|s| s.as_str().to_owned()),
        task.as_str().to_owned(),
    )
}

impl ResultStreams {
    /// Notes a `tasks/result` stream of `scope`'s session for `task`,
    /// until the guard is dropped.
    pub(super) fn open(&self, scope: &Scope, task: &TaskId) -> ResultStream {
        let key = key(scope, task);
        *self
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.clone())
            .or_default() += 1;
        ResultStream {
            open: self.open.clone(),
            key,
        }
    }

    /// Whether `scope`'s session follows `task` on a `tasks/result`
    /// stream here.
    pub(super) fn carries(&self, scope: &Scope, task: &TaskId) -> bool {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&key(scope, task))
    }
}

/// An open `tasks/result` stream.
#[derive(Debug)]
pub(super) struct ResultStream {
    open: Arc<Mutex<HashMap<Key, usize>>>,
    key: Key,
}

/// How long a stream still counts once it ended: the GET stream hears of
/// the same last change (the task's end) a moment later, through its own
/// subscription, and must not send it again.
const LINGER: Duration = Duration::from_secs(2);

impl ResultStream {
    fn close(open: &Mutex<HashMap<Key, usize>>, key: &Key) {
        let mut open = open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(key) {
            *count -= 1;
            if *count == 0 {
                open.remove(key);
            }
        }
    }
}

impl Drop for ResultStream {
    fn drop(&mut self) {
        let (open, key) = (self.open.clone(), self.key.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(LINGER).await;
                    Self::close(&open, &key);
                });
            }
            Err(_) => Self::close(&open, &key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{SessionId, TenantId};

    #[test]
    fn a_stream_carries_its_task_while_open() {
        let streams = ResultStreams::default();
        let scope = Scope {
            tenant: TenantId::default_tenant(),
            session: Some(SessionId::parse("s1", 64).expect("session")),
        };
        let task = TaskId::parse("t1").expect("id");
        assert!(!streams.carries(&scope, &task));
        let first = streams.open(&scope, &task);
        let second = streams.open(&scope, &task);
        assert!(streams.carries(&scope, &task));
        drop(first);
        assert!(streams.carries(&scope, &task));
        drop(second);
        assert!(
            !streams.carries(&scope, &task),
            "outside a runtime: at once"
        );
    }
}
