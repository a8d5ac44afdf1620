//! The browser's session: an encrypted, authenticated cookie (XChaCha20-
//! Poly1305 under a key every replica derives from the store's shared
//! secret) holding which key logged in (or who the identity provider
//! vouched for), the tenant chosen by credentials that reach every tenant,
//! and when the login ends. Never a secret: a key's secret is proved once,
//! at login; afterwards every request looks the key up by id, so a revoked
//! key logs its sessions out within the key cache's few seconds, on every
//! replica. An identity provider's token is verified once too; its session
//! ends when the token would have expired. Each session has a random id:
//! logging out ends it on every replica (the key store keeps the ended ids
//! until they would have expired), so a copy of the cookie taken before
//! is worth nothing after.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::domain::{Caller, Reach, Role};

/// The cookie's name where the `__Host-` prefix cannot be used.
pub const COOKIE: &str = "taskstore_dashboard";
/// Its name where it can (served over HTTPS at the root path): a browser
/// takes such a cookie only from this very host, over HTTPS, for path `/`,
/// so a sibling host cannot plant a session of its choosing.
pub const HOST_COOKIE: &str = "__Host-taskstore_dashboard";

/// The session cookie's name for a dashboard under `base` (`""` for the
/// root), with `secure` cookies or not.
pub fn cookie_name(base: &str, secure: bool) -> &'static str {
    if secure && base.is_empty() {
        HOST_COOKIE
    } else {
        COOKIE
    }
}
/// No cookie of ours is longer; a longer one is not opened.
const MAX_COOKIE_CHARS: usize = 1024;
const NONCE_BYTES: usize = 24;

/// What a session cookie carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// This login's random id: what a logout ends on every replica. A
    /// cookie without one (sealed by an older version) is not accepted.
    #[serde(rename = "s", skip_serializing_if = "Option::is_none", default)]
    pub session_id: Option<String>,
    /// The API key's id (`None` with authentication off).
    #[serde(rename = "k", skip_serializing_if = "Option::is_none", default)]
    pub key_id: Option<String>,
    /// Who the identity provider's token named, for a single sign-on
    /// login (`None` for an API key's).
    #[serde(rename = "i", skip_serializing_if = "Option::is_none", default)]
    pub signed_in: Option<SignedIn>,
    /// The tenant chosen at login, for credentials that reach every tenant.
    #[serde(rename = "t", skip_serializing_if = "Option::is_none", default)]
    pub tenant: Option<String>,
    /// When the login ends (Unix seconds).
    #[serde(rename = "e")]
    pub expires_at: i64,
}

/// A caller an identity provider vouched for, as the session keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedIn {
    #[serde(rename = "s")]
    subject: String,
    #[serde(rename = "r")]
    role: String,
    #[serde(rename = "a")]
    reach: String,
}

impl SignedIn {
    pub fn of(caller: &Caller) -> Self {
        Self {
            subject: caller.subject.clone(),
            role: caller.role.to_string(),
            reach: caller.reach.to_string(),
        }
    }

    /// The caller again; `None` if the cookie named what no caller is.
    pub fn caller(&self) -> Option<Caller> {
        Some(Caller {
            subject: self.subject.clone(),
            role: Role::parse(&self.role).ok()?,
            reach: Reach::parse(&self.reach).ok()?,
        })
    }
}

impl Session {
    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        now.timestamp() >= self.expires_at
    }

    /// A fresh, unguessable session id (128 bits); `None` only when the
    /// system has no randomness to give.
    pub fn new_id() -> Option<String> {
        let mut bytes = [0u8; 16];
        getrandom::getrandom(&mut bytes).ok()?;
        Some(URL_SAFE_NO_PAD.encode(bytes))
    }
}

/// Seals and opens session cookies.
#[derive(Clone)]
pub struct SessionSealer {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for SessionSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionSealer { key: <redacted> }")
    }
}

impl SessionSealer {
    pub fn new(key: [u8; 32]) -> Self {
        Self {
            cipher: XChaCha20Poly1305::new(&key.into()),
        }
    }

    /// The cookie value for `value`; `None` only if encryption failed.
    pub fn seal<T: Serialize>(&self, value: &T) -> Option<String> {
        let plain = serde_json::to_vec(value).ok()?;
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let sealed = self.cipher.encrypt(&nonce, plain.as_slice()).ok()?;
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        Some(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// What a cookie value holds, if this sealer sealed it.
    pub fn open<T: DeserializeOwned>(&self, value: &str) -> Option<T> {
        if value.len() > MAX_COOKIE_CHARS {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(value).ok()?;
        if bytes.len() <= NONCE_BYTES {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
        let plain = self
            .cipher
            .decrypt(XNonce::from_slice(nonce), sealed)
            .ok()?;
        serde_json::from_slice(&plain).ok()
    }
}

/// The value of cookie `name` in a `Cookie` header, if any.
pub fn cookie_value<'a>(header: &'a str, name: &'a str) -> Option<&'a str> {
    cookie_values(header, name).next()
}

/// Every value of cookie `name` in a `Cookie` header, in order.
pub fn cookie_values<'a>(header: &'a str, name: &'a str) -> impl Iterator<Item = &'a str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(move |(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// A `Set-Cookie` value for the session cookie `value` of a dashboard
/// under `base` (a removal when `None`).
pub fn set_cookie(value: Option<&str>, base: &str, secure: bool, max_age_secs: u64) -> String {
    let name = cookie_name(base, secure);
    cookie_header(name, value, base, "Strict", secure, max_age_secs)
}

/// A `Set-Cookie` value: HttpOnly always, `same_site` `Strict` or `Lax`.
pub fn cookie_header(
    name: &str,
    value: Option<&str>,
    path: &str,
    same_site: &str,
    secure: bool,
    max_age_secs: u64,
) -> String {
    let path = if path.is_empty() { "/" } else { path };
    let secure = if secure { "; Secure" } else { "" };
    let (value, max_age) = match value {
        Some(value) => (value, max_age_secs),
        None => ("", 0),
    };
    format!(
        "{name}={value}; Path={path}; HttpOnly; SameSite={same_site}; Max-Age={max_age}{secure}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session {
            session_id: Some("AAAAAAAAAAAAAAAAAAAAAA".into()),
            key_id: Some("abcdefghijkl".into()),
            signed_in: None,
            tenant: None,
            expires_at: 2_000_000_000,
        }
    }

    #[test]
    fn sealed_sessions_open_only_under_their_key_and_unaltered() {
        let sealer = SessionSealer::new([7; 32]);
        let sealed = sealer.seal(&session()).expect("sealed");
        assert_eq!(sealer.open::<Session>(&sealed), Some(session()));
        assert!(
            !sealed.contains("abcdefghijkl"),
            "the key id is not readable"
        );
        assert_eq!(SessionSealer::new([8; 32]).open::<Session>(&sealed), None);
        let mut altered = sealed.into_bytes();
        let last = altered.len() - 2;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).expect("ascii");
        assert_eq!(sealer.open::<Session>(&altered), None);
        for junk in ["", "x", "%%%", &"A".repeat(2000)] {
            assert_eq!(sealer.open::<Session>(junk), None);
        }
    }

    #[test]
    fn signed_in_callers_come_back_as_they_were_and_junk_as_none() {
        let caller = Caller {
            subject: "jwt:alice".into(),
            role: Role::Viewer,
            reach: Reach::AllTenants,
        };
        assert_eq!(SignedIn::of(&caller).caller(), Some(caller));
        let forged = SignedIn {
            subject: "jwt:x".into(),
            role: "root".into(),
            reach: "*".into(),
        };
        assert_eq!(forged.caller(), None);
    }

    #[test]
    fn cookies_are_found_by_name() {
        let header = "a=1; taskstore_dashboard=xyz; b=2";
        assert_eq!(cookie_value(header, COOKIE), Some("xyz"));
        assert_eq!(cookie_value("a=1", COOKIE), None);
        let set = set_cookie(Some("v"), "", false, 60);
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/")
        );
        assert!(set_cookie(None, "/ops", true, 0).contains("Max-Age=0; Secure"));
    }

    #[test]
    fn the_host_prefix_is_used_wherever_a_browser_allows_it() {
        let root = set_cookie(Some("v"), "", true, 60);
        assert!(
            root.starts_with("__Host-taskstore_dashboard=v; Path=/;"),
            "{root}"
        );
        assert!(root.ends_with("; Secure"), "{root}");
        // Under a base path, or without HTTPS, a browser refuses the prefix.
        assert!(set_cookie(Some("v"), "/ops", true, 60).starts_with("taskstore_dashboard=v"));
        assert!(set_cookie(Some("v"), "", false, 60).starts_with("taskstore_dashboard=v"));
        let (a, b) = (Session::new_id(), Session::new_id());
        assert!(a.is_some() && a != b, "random ids");
    }
}
