//! API keys held in the process: for the in-memory backend and tests.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{KeyStore, StoredKey};
use crate::error::StoreError;

#[derive(Debug, Default)]
pub struct MemoryKeys {
    keys: Mutex<BTreeMap<String, StoredKey>>,
    /// Ended dashboard sessions, until when they would have expired.
    ended: Mutex<BTreeMap<String, DateTime<Utc>>>,
}

impl MemoryKeys {
    fn keys(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, StoredKey>> {
        // A panic while holding the lock leaves the map intact: keep going.
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl KeyStore for MemoryKeys {
    async fn insert_key(&self, key: &StoredKey) -> Result<(), StoreError> {
        let mut keys = self.keys();
        if keys.contains_key(&key.key_id) {
            return Err(StoreError::AlreadyExists(key.key_id.clone()));
        }
        keys.insert(key.key_id.clone(), key.clone());
        Ok(())
    }

    async fn find_key(&self, key_id: &str) -> Result<Option<StoredKey>, StoreError> {
        Ok(self.keys().get(key_id).cloned())
    }

    async fn list_keys(&self) -> Result<Vec<StoredKey>, StoreError> {
        let mut keys: Vec<StoredKey> = self.keys().values().cloned().collect();
        keys.sort_by(|a, b| (a.created_at, &a.key_id).cmp(&(b.created_at, &b.key_id)));
        Ok(keys)
    }

    async fn revoke_key(&self, key_id: &str) -> Result<bool, StoreError> {
        Ok(match self.keys().get_mut(key_id) {
            Some(key) if key.revoked_at.is_none() => {
                key.revoked_at = Some(Utc::now());
                true
            }
            _ => false,
        })
    }

    async fn record_use(&self, key_id: &str) -> Result<(), StoreError> {
        if let Some(key) = self.keys().get_mut(key_id) {
            key.last_used_at = Some(Utc::now());
        }
        Ok(())
    }

    async fn end_session(&self, session_id: &str, until: DateTime<Utc>) -> Result<(), StoreError> {
        let mut ended = self
            .ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Utc::now();
        ended.retain(|_, until| *until > now);
        ended.insert(session_id.to_owned(), until);
        Ok(())
    }

    async fn session_ended(&self, session_id: &str) -> Result<bool, StoreError> {
        Ok(self
            .ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(session_id))
    }
}
