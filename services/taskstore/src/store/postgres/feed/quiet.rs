//! Changes nobody else hears (migration 0015): the claim and status-change
//! statements skip the task-change notification of a row whose tenant no
//! other replica follows, and the replica that made the change tells its
//! own subscribers in process instead. Which tenants other replicas follow
//! is `change_listeners` (`registrations.rs` keeps this replica's rows).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::super::rows::TaskRow;
use crate::domain::ProgressToken;
use crate::store::changes::{ChangeFeed, ChangedTask, News, TaskChange};

/// How long a registration counts without being renewed. The SQL of
/// [`unheard!`] says the same number: a unit test holds them together.
pub(in crate::store::postgres) const REGISTRATION_LIFETIME_SECS: u64 = 30;

/// True when the row's tenant (`$tenant`, an SQL expression) is followed by
/// no replica but the one bound as `$me` (text), which is NULL when this
/// replica must notify everything. Evaluated with the statement's snapshot;
/// a registration committed after it cannot be missed, because registering
/// waits for the statements that read the table (`registrations.rs`).
macro_rules! unheard {
    ($tenant:literal, $me:literal) => {
        concat!(
            "(",
            $me,
            "::text IS NOT NULL AND NOT EXISTS (SELECT 1 FROM change_listeners l",
            " WHERE l.tenant_id = ",
            $tenant,
            " AND l.replica_id <> ",
            $me,
            "::text AND l.renewed_at > now() - interval '30 seconds'))"
        )
    };
}
pub(in crate::store::postgres) use unheard;

/// This replica's side of quiet changes: its id, whether it may be quiet
/// at all, and the feed its own subscribers hear from.
#[derive(Debug, Clone)]
pub(in crate::store::postgres) struct Quiet {
    replica: Arc<str>,
    /// False while a listener of an older version (which does not register)
    /// may be connected, and until the first check.
    allowed: Arc<AtomicBool>,
    feed: ChangeFeed,
}

impl Quiet {
    pub(in crate::store::postgres) fn new(replica: Arc<str>, feed: ChangeFeed) -> Self {
        Self {
            replica,
            allowed: Arc::new(AtomicBool::new(false)),
            feed,
        }
    }

    /// This replica's change feed.
    pub(in crate::store::postgres) fn feed(&self) -> &ChangeFeed {
        &self.feed
    }

    pub(in crate::store::postgres) fn replica(&self) -> &str {
        &self.replica
    }

    pub(in crate::store::postgres) fn allow(&self, allowed: bool) {
        self.allowed.store(allowed, Ordering::Relaxed);
    }

    /// What the statements bind for [`unheard!`]'s `$me`.
    pub(in crate::store::postgres) fn me(&self) -> Option<&str> {
        self.allowed
            .load(Ordering::Relaxed)
            .then_some(&*self.replica)
    }

    /// Tells this replica's subscribers of a change its statement made
    /// without a notification; nothing (not even the conversion) when none
    /// here would hear it. (One subscribing meanwhile reads the change: it
    /// is committed.) A row that does not convert (corrupt) is told without
    /// the task, so that subscribers read it.
    pub(in crate::store::postgres) fn tell(
        &self,
        tenant: &str,
        row: &TaskRow,
        progress_token: Option<&str>,
        reach: Reach,
    ) {
        let task_id = row.task_id();
        let heard = match reach {
            Reach::Everyone => self.feed.is_heard(tenant, task_id),
            Reach::TenantFollowers => self.feed.has_tenant_followers(tenant),
        };
        if !heard {
            return;
        }
        let task_id = task_id.to_owned();
        let news = match row.clone().into_task() {
            Ok(task) => News::Task(Arc::new(ChangedTask {
                task,
                progress_token: progress_token.and_then(ProgressToken::from_stored),
            })),
            Err(_) => News::Unknown,
        };
        let change = TaskChange::Changed {
            tenant: tenant.to_owned(),
            task_id,
            news,
        };
        match reach {
            Reach::Everyone => self.feed.publish(change),
            Reach::TenantFollowers => self.feed.publish_to_tenant_followers(change),
        }
    }
}

/// Who hears of a quiet change in process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store::postgres) enum Reach {
    Everyone,
    /// Not the task's own subscribers: they are handed the result
    /// ([`ChangeFeed::hand_over`]).
    TenantFollowers,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_counts_registrations_as_long_as_the_registrar_renews_them() {
        let sql = unheard!("t.tenant_id", "$9");
        assert!(sql.contains(&format!("interval '{REGISTRATION_LIFETIME_SECS} seconds'")));
        assert!(sql.starts_with("($9::text IS NOT NULL AND NOT EXISTS"));
    }
}
