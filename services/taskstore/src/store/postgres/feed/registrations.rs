//! This replica's rows in `change_listeners` (migration 0015): the tenants
//! its subscribers follow, so that other replicas notify their changes to
//! those tenants, and the check that decides whether this replica may make
//! changes quietly at all.
//!
//! A tenant is registered before its first subscriber on this replica reads
//! anything ([`ChangeListeners::ensure`]), under an ACCESS EXCLUSIVE lock on
//! the table: the lock waits for every statement that already read the
//! table (each holds ACCESS SHARE until it commits) and holds back the rest
//! until the row is committed, so every statement either committed before
//! the subscriber's read or sees the registration and notifies. No change
//! falls between the two.
//!
//! Every [`RENEW_EVERY`] the rows of the tenants still followed (or followed
//! within [`FORGET_AFTER`]) are renewed; the others are left to lapse. If
//! renewals failed for so long that the rows may have lapsed, the next
//! renewal takes the lock again and tells every subscriber to read again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sqlx::PgPool;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use super::super::error::store_error;
use super::quiet::{Quiet, REGISTRATION_LIFETIME_SECS};
use crate::error::StoreError;
use crate::store::statements::sql;

/// The `application_name` of this version's listening connection, by which
/// replicas tell it from an older version's (which does not register).
pub(in crate::store::postgres) const LISTENER_APPLICATION: &str = "taskstore change feed";

const RENEW_EVERY: Duration = Duration::from_secs(10);
/// A tenant without subscribers here keeps its registration this long, so
/// that a watcher coming and going does not register it every time.
const FORGET_AFTER: Duration = Duration::from_secs(60);
/// The longest a registration waits for the table lock (`lock_timeout`),
/// and how long after a registration without it its tenants read again.
const LOCK_WAIT: Duration = Duration::from_secs(1);
/// Begins a registration: waits at most [`LOCK_WAIT`] for any lock.
const BEGIN_REGISTRATION: &str = "BEGIN; SET LOCAL lock_timeout = '1s'";

/// The table lock was not had: `lock_timeout` ran out
/// (`lock_not_available`), or PostgreSQL broke a deadlock by cancelling
/// this request (`deadlock_detected`; the registration holds nothing else,
/// so that means a session holding the table waits for something queued
/// behind this lock). Either way the registration goes on without it.
fn is_lock_refused(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| code == "55P03" || code == "40P01")
}

/// Registrations nobody renewed for this long are deleted.
const DELETE_AFTER_SECS: i64 = 600;

/// Renewals this late may have let the rows lapse (other replicas then
/// count them as gone and change this replica's tenants quietly).
fn may_have_lapsed(since_last_renewal: Duration) -> bool {
    since_last_renewal + RENEW_EVERY / 2 >= Duration::from_secs(REGISTRATION_LIFETIME_SECS)
}

/// A new id for this replica's registrations: random, so that a restarted
/// replica never inherits the rows of its previous life.
pub(in crate::store::postgres) fn new_replica_id() -> String {
    let mut bytes = [0u8; 12];
    if getrandom::getrandom(&mut bytes).is_err() {
        // Unique enough: the process and the time it started.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        return format!("{}-{nanos}", std::process::id());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Debug, Default)]
struct Registered {
    /// Tenant → its registration, done once (concurrent first subscribers
    /// wait for the same one).
    tenants: HashMap<String, Arc<OnceCell<()>>>,
    /// When each registered tenant last had a subscriber here.
    last_followed: HashMap<String, Instant>,
}

#[derive(Debug, Clone)]
pub(in crate::store::postgres) struct ChangeListeners {
    pool: PgPool,
    quiet: Quiet,
    registered: Arc<Mutex<Registered>>,
}

impl ChangeListeners {
    /// Checks for older listeners once (so that the replica is quiet, or
    /// not, from its first statement), then starts the renewals, which
    /// check again each time; they stop with `stop`.
    pub(in crate::store::postgres) async fn start(
        pool: PgPool,
        quiet: Quiet,
        stop: CancellationToken,
    ) -> Self {
        let listeners = Self {
            pool,
            quiet,
            registered: Arc::default(),
        };
        listeners.check_for_older_listeners().await;
        let renewing = listeners.clone();
        tokio::spawn(async move { renewing.renew_until(stop).await });
        listeners
    }

    /// Allows quiet changes only while no older listener is connected.
    async fn check_for_older_listeners(&self) {
        match self.older_listeners_connected().await {
            Ok(older) => self.quiet.allow(!older),
            Err(err) => {
                self.quiet.allow(false);
                tracing::warn!(error = %err, "cannot check for older change listeners; notifying every change");
            }
        }
    }

    /// Registers `tenant` unless it is registered already: call before a
    /// subscriber of the tenant reads anything.
    pub(in crate::store::postgres) async fn ensure(&self, tenant: &str) -> Result<(), StoreError> {
        let cell = {
            let mut registered = self.lock();
            registered
                .last_followed
                .insert(tenant.to_owned(), Instant::now());
            registered
                .tenants
                .entry(tenant.to_owned())
                .or_default()
                .clone()
        };
        let (this, tenants) = (self.clone(), [tenant.to_owned()]);
        cell.get_or_try_init(|| async move {
            // On a task of its own: a waiting call that hangs up does not
            // cut a registration short halfway.
            tokio::spawn(async move { this.register(&tenants).await })
                .await
                .unwrap_or_else(|join| Err(StoreError::Internal(join.to_string())))
        })
        .await
        .map(|_| ())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registered> {
        // Plain map updates, never left half-done.
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes (or renews) the rows under the lock described above. The lock
    /// is waited for at most [`LOCK_WAIT`]: a session holding the table
    /// (a `pg_dump`, an operator's open transaction) must not hold back
    /// every claim queued behind this request. Without the lock, the rows
    /// are written anyway and the tenants' subscribers read again once the
    /// statements that may have missed them are surely over.
    async fn register(&self, tenants: &[String]) -> Result<(), StoreError> {
        // The transaction takes nothing before the lock, so it cannot be
        // one end of a deadlock (it can only wait).
        let mut tx = super::super::transaction::begin(&self.pool, Some(BEGIN_REGISTRATION))
            .await
            .map_err(store_error)?;
        match sqlx::query(sql!("LOCK TABLE change_listeners IN ACCESS EXCLUSIVE MODE"))
            .execute(&mut *tx)
            .await
        {
            Ok(_) => {
                self.upsert(&mut *tx, tenants).await?;
                super::super::transaction::commit(tx)
                    .await
                    .map_err(store_error)
            }
            Err(err) if is_lock_refused(&err) => {
                drop(tx);
                self.upsert(&self.pool, tenants).await?;
                tracing::warn!(
                    tenants = tenants.len(),
                    "change listeners registered without the table lock (a session holds it); subscribers read again shortly"
                );
                let (feed, tenants) = (self.quiet.feed().clone(), tenants.to_vec());
                tokio::spawn(async move {
                    tokio::time::sleep(LOCK_WAIT).await;
                    feed.resync_tenants(&tenants);
                });
                Ok(())
            }
            Err(err) => Err(store_error(err)),
        }
    }

    async fn upsert<'e>(
        &self,
        executor: impl sqlx::PgExecutor<'e>,
        tenants: &[String],
    ) -> Result<(), StoreError> {
        sqlx::query(sql!(
            "INSERT INTO change_listeners (tenant_id, replica_id)
             SELECT unnest($1::text[]), $2
             ON CONFLICT (tenant_id, replica_id) DO UPDATE SET renewed_at = now()"
        ))
        .bind(tenants)
        .bind(self.quiet.replica())
        .execute(executor)
        .await
        .map_err(store_error)?;
        Ok(())
    }

    async fn renew_until(self, stop: CancellationToken) {
        let mut last_renewal = Instant::now();
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(RENEW_EVERY) => {}
            }
            self.check_for_older_listeners().await;
            match self.renew(last_renewal.elapsed()).await {
                Ok(()) => last_renewal = Instant::now(),
                Err(err) => {
                    tracing::warn!(error = %err, "cannot renew change listener registrations")
                }
            }
        }
        self.leave().await;
    }

    /// Deletes this replica's rows: other replicas need not notify it any
    /// more. (A replica that dies without leaving has its rows lapse.)
    pub(in crate::store::postgres) async fn leave(&self) {
        let left = sqlx::query(sql!("DELETE FROM change_listeners WHERE replica_id = $1"))
            .bind(self.quiet.replica())
            .execute(&self.pool)
            .await;
        if let Err(err) = left
            && !self.pool.is_closed()
        {
            tracing::warn!(error = %err, "cannot delete change listener registrations; they lapse in 30 s");
        }
    }

    /// Renews the tenants followed lately, forgets the others, and deletes
    /// every replica's long-lapsed rows.
    async fn renew(&self, since_last_renewal: Duration) -> Result<(), StoreError> {
        let followed = self.quiet.feed().followed_tenants();
        let tenants: Vec<String> = {
            let mut registered = self.lock();
            let now = Instant::now();
            for tenant in &followed {
                if registered.tenants.contains_key(tenant) {
                    registered.last_followed.insert(tenant.clone(), now);
                }
            }
            let Registered {
                tenants,
                last_followed,
            } = &mut *registered;
            last_followed.retain(|_, at| now.duration_since(*at) < FORGET_AFTER);
            tenants.retain(|tenant, cell| {
                // One being registered right now stays.
                last_followed.contains_key(tenant) || !cell.initialized()
            });
            tenants
                .iter()
                .filter(|(_, cell)| cell.initialized())
                .map(|(tenant, _)| tenant.clone())
                .collect()
        };
        if !tenants.is_empty() {
            if may_have_lapsed(since_last_renewal) {
                self.register(&tenants).await?;
                tracing::info!(
                    tenants = tenants.len(),
                    "change listener registrations renewed late; subscribers read again"
                );
                self.quiet.feed().resync_tenants(&tenants);
            } else {
                self.upsert(&self.pool, &tenants).await?;
            }
        }
        sqlx::query(sql!(
            "DELETE FROM change_listeners
             WHERE renewed_at < now() - $1 * interval '1 second'"
        ))
        .bind(DELETE_AFTER_SECS)
        .execute(&self.pool)
        .await
        .map_err(store_error)?;
        Ok(())
    }

    /// Whether this replica changes tasks quietly where nobody else listens
    /// (false while an older listener may be connected).
    pub(in crate::store::postgres) fn quiet_allowed(&self) -> bool {
        self.quiet.me().is_some()
    }

    /// Whether a session that may be an older version's listener is
    /// connected to this database: one that LISTENs under another name than
    /// this version's, or one whose query this role may not see.
    pub(in crate::store::postgres) async fn older_listeners_connected(
        &self,
    ) -> Result<bool, StoreError> {
        sqlx::query_scalar(sql!(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
             WHERE datname = current_database() AND backend_type = 'client backend'
               AND pid <> pg_backend_pid() AND application_name <> $1
               AND (query ILIKE 'listen%' OR query = '<insufficient privilege>'))"
        ))
        .bind(LISTENER_APPLICATION)
        .fetch_one(&self.pool)
        .await
        .map_err(store_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_lapse_only_when_late_by_most_of_the_lifetime() {
        assert!(!may_have_lapsed(RENEW_EVERY));
        assert!(!may_have_lapsed(RENEW_EVERY * 2));
        assert!(may_have_lapsed(Duration::from_secs(
            REGISTRATION_LIFETIME_SECS
        )));
        assert!(may_have_lapsed(Duration::from_secs(25)));
    }

    #[test]
    fn a_registration_waits_for_the_lock_no_longer_than_said() {
        let said = format!("lock_timeout = '{}s'", LOCK_WAIT.as_secs());
        assert!(BEGIN_REGISTRATION.contains(&said), "{BEGIN_REGISTRATION}");
    }
}
