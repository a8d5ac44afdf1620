//! Opaque, tamper-evident ListTasks cursors.
//!
//! A cursor names the last task of a page by its keyset position
//! (created_at, task_id) and carries an HMAC-SHA256 tag over that position and
//! the listing it was issued for (scope and filter). A cursor that was
//! altered, truncated, forged or replayed with another session or filter
//! fails the tag check and is INVALID_ARGUMENT; it can never widen what a
//! caller sees. The key is shared by every replica (backends keep it in their
//! database).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::ids::TaskId;
use super::task::{Scope, TaskFilter};

const VERSION: u8 = 1;
const TAG_BYTES: usize = 16;
const TIMESTAMP_BYTES: usize = 8;
/// No valid cursor is longer than this many characters.
const MAX_ENCODED_LEN: usize = 256;

/// Where the next page starts: strictly after this (created_at, task_id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorPosition {
    pub created_at: DateTime<Utc>,
    pub task_id: TaskId,
}

/// The cursor was not issued by this store for this scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("is malformed, was altered, or belongs to another listing")]
pub struct InvalidCursor;

/// Encodes and checks cursors with one secret key.
#[derive(Clone)]
pub struct CursorCodec {
    key: [u8; 32],
}

impl std::fmt::Debug for CursorCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorCodec { key: <redacted> }")
    }
}

impl CursorCodec {
    pub const KEY_BYTES: usize = 32;

    pub fn new(key: [u8; 32]) -> Self {
        Self { key }
    }

    /// A codec with a fresh random key, for stores that live in one process.
    pub fn random() -> Result<Self, getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::getrandom(&mut key)?;
        Ok(Self::new(key))
    }

    /// A key for `label`, derived from this one: every replica derives the
    /// same, and no two labels share one.
    pub fn derive(&self, label: &str) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("hmac takes keys of any length"));
        mac.update(b"taskstore derived key\0");
        mac.update(label.as_bytes());
        mac.finalize().into_bytes().into()
    }

    pub fn encode(&self, scope: &Scope, filter: &TaskFilter, position: &CursorPosition) -> String {
        let body = body(position);
        let mut bytes = body.clone();
        bytes.extend_from_slice(&self.tag(scope, filter, &body));
        URL_SAFE_NO_PAD.encode(bytes)
    }

    pub fn decode(
        &self,
        scope: &Scope,
        filter: &TaskFilter,
        cursor: &str,
    ) -> Result<CursorPosition, InvalidCursor> {
        if cursor.len() > MAX_ENCODED_LEN {
            return Err(InvalidCursor);
        }
        let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| InvalidCursor)?;
        let split = bytes.len().checked_sub(TAG_BYTES).ok_or(InvalidCursor)?;
        let (body, tag) = bytes.split_at(split);
        self.mac(scope, filter, body)
            .verify_truncated_left(tag)
            .map_err(|_| InvalidCursor)?;
        parse_body(body)
    }

    fn tag(&self, scope: &Scope, filter: &TaskFilter, body: &[u8]) -> [u8; TAG_BYTES] {
        let full = self.mac(scope, filter, body).finalize().into_bytes();
        let mut tag = [0u8; TAG_BYTES];
        tag.copy_from_slice(&full[..TAG_BYTES]);
        tag
    }

    fn mac(&self, scope: &Scope, filter: &TaskFilter, body: &[u8]) -> Hmac<Sha256> {
        // `new_from_slice` accepts keys of any length for HMAC.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("hmac takes keys of any length"));
        let mut parts = vec![
            Some(scope.tenant.as_str().to_owned()),
            scope.session.as_ref().map(|s| s.as_str().to_owned()),
        ];
        // An empty filter adds nothing, so cursors issued before filters
        // existed (by a replica not yet upgraded) stay valid.
        if filter != &TaskFilter::default() {
            let statuses: Vec<&str> = filter.statuses().iter().map(|s| s.as_str()).collect();
            parts.push(Some(statuses.join(",")));
            parts.push(filter.tool.as_ref().map(|t| t.as_str().to_owned()));
        }
        // Length-prefix every part so no two listings share a byte string.
        for part in parts {
            match part.as_deref() {
                Some(text) => {
                    mac.update(&[1]);
                    mac.update(&(text.len() as u64).to_be_bytes());
                    mac.update(text.as_bytes());
                }
                None => mac.update(&[0]),
            }
        }
        mac.update(body);
        mac
    }
}

fn body(position: &CursorPosition) -> Vec<u8> {
    let mut body = Vec::with_capacity(1 + TIMESTAMP_BYTES + position.task_id.as_str().len());
    body.push(VERSION);
    body.extend_from_slice(&position.created_at.timestamp_micros().to_be_bytes());
    body.extend_from_slice(position.task_id.as_str().as_bytes());
    body
}

fn parse_body(body: &[u8]) -> Result<CursorPosition, InvalidCursor> {
    let (&version, rest) = body.split_first().ok_or(InvalidCursor)?;
    if version != VERSION || rest.len() <= TIMESTAMP_BYTES {
        return Err(InvalidCursor);
    }
    let (micros, id) = rest.split_at(TIMESTAMP_BYTES);
    let micros = i64::from_be_bytes(micros.try_into().map_err(|_| InvalidCursor)?);
    let created_at = DateTime::from_timestamp_micros(micros).ok_or(InvalidCursor)?;
    let id = std::str::from_utf8(id).map_err(|_| InvalidCursor)?;
    let task_id = TaskId::parse(id).map_err(|_| InvalidCursor)?;
    Ok(CursorPosition {
        created_at,
        task_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SessionId;

    fn position() -> CursorPosition {
        CursorPosition {
            created_at: DateTime::from_timestamp_micros(1_700_000_000_123_456).expect("valid time"),
            task_id: TaskId::parse("task-42").expect("valid id"),
        }
    }

    fn session(name: &str) -> Scope {
        Scope::session(SessionId::parse(name, 256).expect("valid session"))
    }

    #[test]
    fn round_trips_within_its_scope() {
        let codec = CursorCodec::new([7; 32]);
        let scope = session("s1");
        let cursor = codec.encode(&scope, &all(), &position());
        assert_eq!(codec.decode(&scope, &all(), &cursor), Ok(position()));
    }

    fn all() -> TaskFilter {
        TaskFilter::default()
    }

    #[test]
    fn is_bound_to_its_filter_in_any_order() {
        use crate::domain::{TaskStatus, ToolName};
        let codec = CursorCodec::new([7; 32]);
        let scope = Scope::tenant_wide();
        let tool = || Some(ToolName::parse("echo").expect("tool"));
        let working = TaskFilter::new([TaskStatus::Failed, TaskStatus::Working], tool());
        let cursor = codec.encode(&scope, &working, &position());
        let same = TaskFilter::new([TaskStatus::Working, TaskStatus::Failed], tool());
        assert_eq!(codec.decode(&scope, &same, &cursor), Ok(position()));
        for other in [
            all(),
            TaskFilter::new([TaskStatus::Working], tool()),
            TaskFilter::new([TaskStatus::Working, TaskStatus::Failed], None),
        ] {
            assert_eq!(codec.decode(&scope, &other, &cursor), Err(InvalidCursor));
        }
        let unfiltered = codec.encode(&scope, &all(), &position());
        assert_eq!(
            codec.decode(&scope, &working, &unfiltered),
            Err(InvalidCursor)
        );
    }

    #[test]
    fn refuses_other_scopes_keys_and_every_single_byte_change() {
        let codec = CursorCodec::new([7; 32]);
        let scope = session("s1");
        let cursor = codec.encode(&scope, &all(), &position());
        assert_eq!(
            codec.decode(&session("s2"), &all(), &cursor),
            Err(InvalidCursor)
        );
        assert_eq!(
            codec.decode(&Scope::tenant_wide(), &all(), &cursor),
            Err(InvalidCursor)
        );
        assert_eq!(
            CursorCodec::new([8; 32]).decode(&scope, &all(), &cursor),
            Err(InvalidCursor)
        );

        let raw = URL_SAFE_NO_PAD.decode(&cursor).expect("base64");
        for i in 0..raw.len() {
            let mut tampered = raw.clone();
            tampered[i] ^= 0x01;
            let tampered = URL_SAFE_NO_PAD.encode(tampered);
            assert_eq!(
                codec.decode(&scope, &all(), &tampered),
                Err(InvalidCursor),
                "byte {i}"
            );
        }
    }

    #[test]
    fn refuses_garbage() {
        let codec = CursorCodec::new([7; 32]);
        let scope = Scope::tenant_wide();
        for bad in ["", "!!!", "AAAA", &"A".repeat(10_000), "ÿ"] {
            assert_eq!(
                codec.decode(&scope, &all(), bad),
                Err(InvalidCursor),
                "{bad:?}"
            );
        }
    }
}
