//! API keys at rest: what `taskstore keys` writes and the authentication
//! layer reads; and the dashboard sessions ended by a logout. Only a
//! digest of each key is stored (see `auth::api_keys`). PostgreSQL and
//! SQLite keep them in their database, so keys made by the CLI are seen by
//! every running replica; memory keeps them in the process (tests).
//!
//! PostgreSQL and SQLite run the same statements ([`sql_key_store!`] in
//! `sql.rs`): both take `$n` placeholders and `ON CONFLICT … DO NOTHING`,
//! and every time written comes from the process's clock (SQLite has no
//! `now()`). `postgres.rs` and `sqlite.rs` hold only their pool and how a
//! failure is reported.

#[macro_use]
mod sql;
mod memory;
mod postgres;
mod sqlite;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub use self::memory::MemoryKeys;
pub use self::postgres::PgKeys;
pub use self::sqlite::SqliteKeys;
use crate::domain::{Reach, Role, TenantId};
use crate::error::StoreError;

/// One key, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// The public part of the key, also in the key itself: the lookup.
    pub key_id: String,
    /// SHA-256 of the whole key.
    pub secret_sha256: [u8; 32],
    pub reach: Reach,
    pub role: Role,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// When a replica last accepted it (recorded at most once a minute).
    pub last_used_at: Option<DateTime<Utc>>,
}

#[async_trait]
pub trait KeyStore: Send + Sync + 'static {
    async fn insert_key(&self, key: &StoredKey) -> Result<(), StoreError>;

    async fn find_key(&self, key_id: &str) -> Result<Option<StoredKey>, StoreError>;

    /// Every key, revoked ones too, oldest first.
    async fn list_keys(&self) -> Result<Vec<StoredKey>, StoreError>;

    /// Revokes a key; `false` when there is no such active key.
    async fn revoke_key(&self, key_id: &str) -> Result<bool, StoreError>;

    /// Records that the key was accepted now.
    async fn record_use(&self, key_id: &str) -> Result<(), StoreError>;

    /// Ends the dashboard session `session_id` on every replica (a logout):
    /// it is refused from now on. `until` is when it would have expired
    /// anyway; the record may be forgotten after it.
    async fn end_session(&self, session_id: &str, until: DateTime<Utc>) -> Result<(), StoreError>;

    /// Whether the dashboard session `session_id` was ended.
    async fn session_ended(&self, session_id: &str) -> Result<bool, StoreError>;
}

/// A stored row, as the databases return it.
type KeyRow = (
    String,
    Vec<u8>,
    Option<String>,
    String,
    String,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
);

fn key_of_row(row: KeyRow) -> Result<StoredKey, StoreError> {
    let (key_id, digest, tenant, role, name, created_at, revoked_at, last_used_at) = row;
    let corrupt = |what: &str| StoreError::Internal(format!("api key {key_id} has a bad {what}"));
    Ok(StoredKey {
        secret_sha256: digest
            .as_slice()
            .try_into()
            .map_err(|_| corrupt("digest"))?,
        reach: match tenant {
            None => Reach::AllTenants,
            Some(tenant) => Reach::Tenant(TenantId::parse(&tenant).map_err(|_| corrupt("tenant"))?),
        },
        role: Role::parse(&role).map_err(|_| corrupt("role"))?,
        key_id,
        name,
        created_at,
        revoked_at,
        last_used_at,
    })
}

/// The tenant column of a key: NULL for all tenants.
fn tenant_column(reach: &Reach) -> Option<&str> {
    match reach {
        Reach::Tenant(tenant) => Some(tenant.as_str()),
        Reach::AllTenants => None,
    }
}
