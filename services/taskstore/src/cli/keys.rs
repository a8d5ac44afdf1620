//! `taskstore keys create|list|revoke`: API keys, made and revoked in the
//! database the service uses (like `migrate`, not over the network: whoever
//! runs it holds the database credentials already). A key is printed once,
//! when it is made; only its digest is kept.

use std::io::Write as _;
use std::sync::Arc;

use super::exit::{ClientError, Exit};
use crate::auth::api_keys::{self, REVOCATION_DELAY};
use crate::config::KeysAction;
use crate::domain::{Reach, Role};
use crate::store::keys::{KeyStore, StoredKey};

/// The longest name a key may have.
const MAX_NAME_BYTES: usize = 200;

pub async fn run(action: KeysAction, keys: Arc<dyn KeyStore>) -> Result<Exit, ClientError> {
    match action {
        KeysAction::Create {
            tenant,
            role,
            name,
            json,
        } => {
            let reach = Reach::parse(&tenant).map_err(|err| {
                ClientError::Usage(format!("--tenant {err}, or * for every tenant"))
            })?;
            let role =
                Role::parse(&role).map_err(|err| ClientError::Usage(format!("--role {err}")))?;
            if reach == Reach::AllTenants && role == Role::Client {
                return Err(ClientError::Usage(
                    "a client key acts in one tenant: name it with --tenant".to_owned(),
                ));
            }
            if name.len() > MAX_NAME_BYTES || name.chars().any(char::is_control) {
                return Err(ClientError::Usage(format!(
                    "--name must be at most {MAX_NAME_BYTES} bytes without control characters"
                )));
            }
            let issued = api_keys::issue(reach, role, &name)
                .map_err(|err| ClientError::Failed(format!("no randomness for the key: {err}")))?;
            keys.insert_key(&issued.stored).await?;
            if json {
                let mut shown = described(&issued.stored);
                shown["key"] = issued.key.clone().into();
                writeln!(std::io::stdout().lock(), "{shown}")?;
            } else {
                writeln!(std::io::stdout().lock(), "{}", issued.key)?;
                eprintln!(
                    "key {} ({role} in tenant {tenant}): shown once, store it now; pass it as --token, or with --token-file",
                    issued.stored.key_id
                );
            }
            Ok(Exit::Done)
        }
        KeysAction::List { json } => {
            let all = keys.list_keys().await?;
            if json {
                for key in &all {
                    writeln!(std::io::stdout().lock(), "{}", described(key))?;
                }
            } else {
                writeln!(
                    std::io::stdout().lock(),
                    "{:<14} {:<20} {:<7} {:<8} {:<20} {:<20} NAME",
                    "KEY ID",
                    "TENANT",
                    "ROLE",
                    "STATE",
                    "CREATED",
                    "LAST USED"
                )?;
                for key in &all {
                    let state = if key.revoked_at.is_some() {
                        "revoked"
                    } else {
                        "active"
                    };
                    let last_used = key.last_used_at.map_or_else(
                        || "never".to_owned(),
                        |at| at.format("%Y-%m-%d %H:%M:%S").to_string(),
                    );
                    writeln!(
                        std::io::stdout().lock(),
                        "{:<14} {:<20} {:<7} {:<8} {:<20} {:<20} {}",
                        key.key_id,
                        key.reach,
                        key.role,
                        state,
                        key.created_at.format("%Y-%m-%d %H:%M:%S"),
                        last_used,
                        key.name
                    )?;
                }
            }
            Ok(Exit::Done)
        }
        KeysAction::Revoke { key_id } => {
            if keys.revoke_key(&key_id).await? {
                eprintln!(
                    "key {key_id} revoked: every replica refuses it within {} s",
                    REVOCATION_DELAY.as_secs()
                );
                Ok(Exit::Done)
            } else {
                Err(ClientError::NotFound(format!(
                    "no active key {key_id} (see taskstore keys list)"
                )))
            }
        }
    }
}

fn described(key: &StoredKey) -> serde_json::Value {
    serde_json::json!({
        "keyId": key.key_id,
        "tenant": key.reach.to_string(),
        "role": key.role.as_str(),
        "name": key.name,
        "createdAt": key.created_at.to_rfc3339(),
        "revokedAt": key.revoked_at.map(|at| at.to_rfc3339()),
        "lastUsedAt": key.last_used_at.map(|at| at.to_rfc3339()),
    })
}
