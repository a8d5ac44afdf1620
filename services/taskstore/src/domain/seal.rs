//! Tokens a client carries back to any replica, sealed so that it cannot
//! forge or alter them, nor use one in another scope: the id of an input
//! request the endpoint sends (2025-11-25), a `requestState` (2026-07-28).
//! Each is a few strings under an HMAC-SHA256 tag over their purpose, the
//! scope (tenant and session) they were issued in, and themselves; the key
//! is shared by every replica (derived from the store's cursor key).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::task::Scope;

const TAG_BYTES: usize = 16;
/// No token of ours is longer (ids and keys are bounded).
pub const MAX_TOKEN_CHARS: usize = 2048;

/// What a token is for: one purpose's token is never another's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The JSON-RPC id of an input request sent to a 2025-11-25 client:
    /// the task and the question's key.
    InputRequestId,
    /// A 2026-07-28 `requestState`: the task of a synchronous call that
    /// waits for input.
    RequestState,
    /// A 2025-11-25 stream's event id: where a client that reconnects
    /// with `Last-Event-ID` resumes.
    EventId,
}

impl Purpose {
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::InputRequestId => b"input-request-id",
            Purpose::RequestState => b"request-state",
            Purpose::EventId => b"event-id",
        }
    }
}

/// The token is not one this service sealed for this scope and purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("is malformed, was altered, or belongs to another caller")]
pub struct InvalidSeal;

/// Seals and opens tokens with one key.
#[derive(Clone)]
pub struct Sealer {
    key: [u8; 32],
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer { key: <redacted> }")
    }
}

impl Sealer {
    pub fn new(key: [u8; 32]) -> Self {
        Self { key }
    }

    pub fn seal(&self, purpose: Purpose, scope: &Scope, parts: &[&str]) -> String {
        let body = serde_json::to_vec(parts).unwrap_or_default();
        let tag = self.tag(purpose, scope, &body);
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&body),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// The parts of `token`, if this service sealed it for `purpose` in
    /// `scope`.
    pub fn open(
        &self,
        purpose: Purpose,
        scope: &Scope,
        token: &str,
    ) -> Result<Vec<String>, InvalidSeal> {
        if token.len() > MAX_TOKEN_CHARS {
            return Err(InvalidSeal);
        }
        let (body, tag) = token.split_once('.').ok_or(InvalidSeal)?;
        let body = URL_SAFE_NO_PAD.decode(body).map_err(|_| InvalidSeal)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| InvalidSeal)?;
        if tag.len() != TAG_BYTES {
            return Err(InvalidSeal);
        }
        self.mac(purpose, scope, &body)
            .verify_truncated_left(&tag)
            .map_err(|_| InvalidSeal)?;
        serde_json::from_slice(&body).map_err(|_| InvalidSeal)
    }

    fn tag(&self, purpose: Purpose, scope: &Scope, body: &[u8]) -> [u8; TAG_BYTES] {
        let full = self.mac(purpose, scope, body).finalize().into_bytes();
        let mut tag = [0u8; TAG_BYTES];
        tag.copy_from_slice(&full[..TAG_BYTES]);
        tag
    }

    fn mac(&self, purpose: Purpose, scope: &Scope, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("hmac takes keys of any length"));
        // Every part length-prefixed: no two inputs share a byte string.
        let session = scope.session.as_ref().map(|s| s.as_str());
        for part in [
            Some(purpose.label()),
            Some(scope.tenant.as_str().as_bytes()),
            session.map(str::as_bytes),
            Some(body),
        ] {
            match part {
                Some(bytes) => {
                    mac.update(&[1]);
                    mac.update(&(bytes.len() as u64).to_be_bytes());
                    mac.update(bytes);
                }
                None => mac.update(&[0]),
            }
        }
        mac
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::domain::{SessionId, TenantId};

    fn scope(tenant: &str, session: Option<&str>) -> Scope {
        Scope {
            tenant: TenantId::parse(tenant).expect("tenant"),
            session: session.map(|s| SessionId::parse(s, 256).expect("session")),
        }
    }

    #[test]
    fn a_token_opens_only_for_its_purpose_and_scope() {
        let sealer = Sealer::new([7; 32]);
        let mine = scope("acme", Some("s1"));
        let token = sealer.seal(Purpose::InputRequestId, &mine, &["task-1", "confirm"]);
        assert_eq!(
            sealer.open(Purpose::InputRequestId, &mine, &token),
            Ok(vec!["task-1".to_owned(), "confirm".to_owned()])
        );
        for (purpose, scope) in [
            (Purpose::RequestState, mine.clone()),
            (Purpose::InputRequestId, scope("globex", Some("s1"))),
            (Purpose::InputRequestId, scope("acme", Some("s2"))),
            (Purpose::InputRequestId, scope("acme", None)),
        ] {
            assert_eq!(sealer.open(purpose, &scope, &token), Err(InvalidSeal));
        }
        let other_key = Sealer::new([8; 32]);
        assert_eq!(
            other_key.open(Purpose::InputRequestId, &mine, &token),
            Err(InvalidSeal)
        );
        let (body, tag) = token.split_once('.').expect("two halves");
        let forged_body = URL_SAFE_NO_PAD.encode(br#"["task-2","confirm"]"#);
        assert_eq!(
            sealer.open(
                Purpose::InputRequestId,
                &mine,
                &format!("{forged_body}.{tag}")
            ),
            Err(InvalidSeal)
        );
        assert_eq!(
            sealer.open(Purpose::InputRequestId, &mine, body),
            Err(InvalidSeal)
        );
    }

    proptest! {
        #[test]
        fn no_string_opens_unless_sealed(raw in ".{0,300}") {
            let sealer = Sealer::new([1; 32]);
            prop_assert_eq!(
                sealer.open(Purpose::RequestState, &scope("acme", None), &raw),
                Err(InvalidSeal)
            );
        }
    }
}
