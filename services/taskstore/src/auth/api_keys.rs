//! API keys: `tsk_<key id>_<secret>`, made by `taskstore keys create`.
//!
//! The key id (12 base32 characters, public, in `keys list`) finds the
//! stored key; the secret (32 random bytes) proves it. Only SHA-256 of the
//! whole key is stored. A slow password hash (argon2, bcrypt) protects
//! low-entropy secrets chosen by people; a 256-bit random secret cannot be
//! guessed whatever the hash, so a fast one is right and costs microseconds
//! per RPC. The digests are compared in constant time.
//!
//! Lookups are cached for a few seconds per key id, so a busy client costs
//! one query per interval, and a revoked key stops working on every replica
//! within that interval. Each replica records a key's last use at most once
//! a minute, off the request's path (`taskstore keys list` shows it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use chrono::Utc;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AuthFailure;
use crate::domain::{Caller, Reach, Role};
use crate::store::keys::{KeyStore, StoredKey};

const PREFIX: &str = "tsk_";
const KEY_ID_CHARS: usize = 12;
const SECRET_BYTES: usize = 32;
/// How long a looked-up key is trusted before it is read again: the
/// longest a revoked key keeps working.
pub const REVOCATION_DELAY: Duration = Duration::from_secs(5);
/// Cached lookups at most; beyond, the oldest half is dropped.
const CACHE_CAPACITY: usize = 10_000;
/// How often a replica records that a key is in use.
pub const USE_RECORDED_EVERY: Duration = Duration::from_secs(60);

/// A key just made: what to store, and the key itself (shown once).
#[derive(Debug)]
pub struct IssuedKey {
    pub stored: StoredKey,
    pub key: String,
}

/// Makes a new key for `role` in `reach`.
pub fn issue(reach: Reach, role: Role, name: &str) -> Result<IssuedKey, getrandom::Error> {
    const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut id_bytes = [0u8; KEY_ID_CHARS];
    getrandom::getrandom(&mut id_bytes)?;
    let key_id: String = id_bytes
        .iter()
        .map(|b| char::from(BASE32[usize::from(b % 32)]))
        .collect();
    let mut secret = [0u8; SECRET_BYTES];
    getrandom::getrandom(&mut secret)?;
    let key = format!(
        "{PREFIX}{key_id}_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    );
    Ok(IssuedKey {
        stored: StoredKey {
            secret_sha256: digest(&key),
            key_id,
            reach,
            role,
            name: name.to_owned(),
            created_at: Utc::now(),
            revoked_at: None,
            last_used_at: None,
        },
        key,
    })
}

/// Whether `token` has the shape of one of our keys.
pub fn looks_like_key(token: &str) -> bool {
    key_id_of(token).is_some()
}

/// The key id of a well-formed key.
fn key_id_of(token: &str) -> Option<&str> {
    let rest = token.strip_prefix(PREFIX)?;
    let (key_id, secret) = rest.split_once('_')?;
    let well_formed = key_id.len() == KEY_ID_CHARS
        && key_id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b))
        && secret.len() == 43
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    well_formed.then_some(key_id)
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Checks presented keys against a [`KeyStore`].
pub struct ApiKeys {
    store: Arc<dyn KeyStore>,
    cache: Mutex<HashMap<String, (Option<StoredKey>, Instant)>>,
    /// When this replica last recorded each key's use.
    recorded_uses: Mutex<HashMap<String, Instant>>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeys").finish_non_exhaustive()
    }
}

impl ApiKeys {
    pub fn new(store: Arc<dyn KeyStore>) -> Self {
        Self {
            store,
            cache: Mutex::new(HashMap::new()),
            recorded_uses: Mutex::new(HashMap::new()),
        }
    }

    /// The caller `token` stands for.
    pub async fn authenticate(&self, token: &str) -> Result<Caller, AuthFailure> {
        let key_id = key_id_of(token).ok_or(AuthFailure::invalid("malformed key"))?;
        self.caller_if(key_id, |stored| {
            let matches: bool = stored.secret_sha256.ct_eq(&digest(token)).into();
            matches.then_some(()).ok_or("wrong secret")
        })
        .await
    }

    /// The caller a key id stands for while the key is neither revoked nor
    /// deleted (read again at most [`REVOCATION_DELAY`] after the last
    /// look): for a browser session that proved the secret once, at login,
    /// and keeps only the id.
    pub async fn caller_of_key_id(&self, key_id: &str) -> Result<Caller, AuthFailure> {
        self.caller_if(key_id, |_| Ok(())).await
    }

    /// The caller of the stored key `key_id` if `proved` accepts it (else
    /// its reason) and it is not revoked; its use recorded.
    async fn caller_if(
        &self,
        key_id: &str,
        proved: impl FnOnce(&StoredKey) -> Result<(), &'static str>,
    ) -> Result<Caller, AuthFailure> {
        let stored = self
            .lookup(key_id)
            .await?
            .ok_or_else(|| AuthFailure::invalid_key(key_id, "unknown key"))?;
        proved(&stored).map_err(|reason| AuthFailure::invalid_key(key_id, reason))?;
        if stored.revoked_at.is_some() {
            return Err(AuthFailure::invalid_key(key_id, "revoked"));
        }
        self.record_use(key_id);
        Ok(Caller {
            subject: format!("key:{}", stored.key_id),
            role: stored.role,
            reach: stored.reach,
        })
    }

    async fn lookup(&self, key_id: &str) -> Result<Option<StoredKey>, AuthFailure> {
        if let Some((stored, at)) = self.cached().get(key_id)
            && at.elapsed() < REVOCATION_DELAY
        {
            return Ok(stored.clone());
        }
        let stored = self
            .store
            .find_key(key_id)
            .await
            .map_err(|err| AuthFailure::Unavailable(err.to_string()))?;
        let mut cache = self.cached();
        if cache.len() >= CACHE_CAPACITY {
            cache.retain(|_, (_, at)| at.elapsed() < REVOCATION_DELAY);
        }
        if cache.len() < CACHE_CAPACITY {
            cache.insert(key_id.to_owned(), (stored.clone(), Instant::now()));
        }
        Ok(stored)
    }

    /// Records the key's use in the store, in the background, unless this
    /// replica did within [`USE_RECORDED_EVERY`].
    fn record_use(&self, key_id: &str) {
        {
            let mut uses = self
                .recorded_uses
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if uses
                .get(key_id)
                .is_some_and(|at| at.elapsed() < USE_RECORDED_EVERY)
            {
                return;
            }
            if uses.len() >= CACHE_CAPACITY {
                uses.retain(|_, at| at.elapsed() < USE_RECORDED_EVERY);
            }
            uses.insert(key_id.to_owned(), Instant::now());
        }
        let (store, key_id) = (self.store.clone(), key_id.to_owned());
        tokio::spawn(async move {
            if let Err(err) = store.record_use(&key_id).await {
                tracing::debug!(key = %key_id, error = %err, "the key's last use was not recorded");
            }
        });
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Option<StoredKey>, Instant)>> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::keys::MemoryKeys;

    fn tenant(name: &str) -> Reach {
        Reach::Tenant(crate::domain::TenantId::parse(name).expect("tenant"))
    }

    #[tokio::test]
    async fn an_issued_key_authenticates_as_its_role_and_tenant_until_revoked() {
        let store = Arc::new(MemoryKeys::default());
        let issued = issue(tenant("acme"), Role::Client, "ci").expect("issue");
        store.insert_key(&issued.stored).await.expect("insert");
        let keys = ApiKeys::new(store.clone());
        let caller = keys.authenticate(&issued.key).await.expect("authenticated");
        assert_eq!(
            (caller.role, caller.reach, caller.subject),
            (
                Role::Client,
                tenant("acme"),
                format!("key:{}", issued.stored.key_id)
            )
        );
        assert!(
            store
                .revoke_key(&issued.stored.key_id)
                .await
                .expect("revoke")
        );
        // A fresh checker sees the revocation at once; a caching one within
        // the revocation delay.
        let fresh = ApiKeys::new(store);
        assert_eq!(
            fresh.authenticate(&issued.key).await,
            Err(AuthFailure::invalid_key(&issued.stored.key_id, "revoked"))
        );
    }

    #[tokio::test]
    async fn forged_and_altered_keys_are_refused() {
        let store = Arc::new(MemoryKeys::default());
        let issued = issue(Reach::AllTenants, Role::Worker, "").expect("issue");
        store.insert_key(&issued.stored).await.expect("insert");
        let keys = ApiKeys::new(store);
        let mut altered = issued.key.clone();
        let last = altered.pop().expect("a character");
        altered.push(if last == 'A' { 'B' } else { 'A' });
        let other = issue(Reach::AllTenants, Role::Worker, "").expect("issue");
        let id = |key: &str| key_id_of(key).expect("a key id").to_owned();
        for (token, credential, reason) in [
            (altered.as_str(), Some(id(&issued.key)), "wrong secret"),
            (other.key.as_str(), Some(id(&other.key)), "unknown key"),
            ("", None, "malformed key"),
            ("tsk_", None, "malformed key"),
            ("tsk_aaaaaaaaaaaa_short", None, "malformed key"),
            ("Bearer x", None, "malformed key"),
            (&issued.key[..issued.key.len() - 1], None, "malformed key"),
        ] {
            let refused = keys.authenticate(token).await.expect_err(token);
            assert_eq!(
                (refused.credential(), refused.reason()),
                (credential.map(|id| format!("key:{id}")).as_deref(), reason),
                "{token:?}"
            );
        }
    }

    #[test]
    fn keys_have_their_shape_and_are_unique() {
        let a = issue(Reach::AllTenants, Role::Admin, "").expect("issue");
        let b = issue(Reach::AllTenants, Role::Admin, "").expect("issue");
        assert!(looks_like_key(&a.key) && looks_like_key(&b.key));
        assert_ne!(a.key, b.key);
        assert!(!a.key.contains(&hex(&a.stored.secret_sha256)));
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}
