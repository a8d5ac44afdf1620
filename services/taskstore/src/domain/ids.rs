//! Identifiers that cross the service boundary, parsed once at the edge.

use std::fmt;

use serde::Serialize;

/// Why a raw identifier was refused; the caller adds the field name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidId(pub &'static str);

/// A task id: 1 to 128 printable ASCII characters without spaces.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct TaskId(String);

impl TaskId {
    /// The longest id accepted, in characters (all ASCII, so also bytes).
    pub const MAX_LEN: usize = 128;
    /// Random bytes in a generated id: 128 bits, as MCP asks of task ids.
    const GENERATED_BYTES: usize = 16;

    /// Parses a caller-supplied id.
    pub fn parse(raw: &str) -> Result<Self, InvalidId> {
        let well_formed = !raw.is_empty()
            && raw.len() <= Self::MAX_LEN
            && raw.bytes().all(|b| b.is_ascii_graphic());
        if well_formed {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InvalidId(
                "must be 1 to 128 printable ASCII characters without spaces",
            ))
        }
    }

    /// Whether a caller may give a new task this id: every well-formed id
    /// but `.` and `..`, which URLs cannot carry as a path segment
    /// (browsers and proxies resolve them away, so such a task's dashboard
    /// page and actions would be unreachable; percent-encoding does not
    /// help: `%2E` segments are resolved too).
    pub fn check_new(&self) -> Result<(), InvalidId> {
        if self.0 == "." || self.0 == ".." {
            return Err(InvalidId(
                "must not be . or .. (URLs cannot address a path segment of that name)",
            ));
        }
        Ok(())
    }

    /// A fresh, unguessable id: 128 bits from the operating system's CSPRNG,
    /// written as 32 lowercase hex digits.
    pub fn generate() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; Self::GENERATED_BYTES];
        getrandom::getrandom(&mut bytes)?;
        Ok(Self(hex(&bytes)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

// `pad`, not `write_str`: honours width and alignment (`{:<34}`) in tables.
impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// A session id: 1 to 256 bytes of UTF-8 without control characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// The default limit on a session id's length in bytes.
    pub const DEFAULT_MAX_BYTES: usize = 256;

    /// Parses a session id no longer than `max_bytes`.
    pub fn parse(raw: &str, max_bytes: usize) -> Result<Self, InvalidId> {
        if raw.is_empty() {
            return Err(InvalidId("must not be empty"));
        }
        if raw.len() > max_bytes {
            return Err(InvalidId("is longer than the configured limit"));
        }
        if raw.chars().any(char::is_control) {
            return Err(InvalidId("must not contain control characters"));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// The tenant a task belongs to. Until authentication exists every request
/// acts for [`TenantId::default_tenant`]; the key of every stored task is
/// (tenant, task id) so that binding callers to tenants needs no migration.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TenantId(String);

impl TenantId {
    const DEFAULT: &'static str = "default";

    pub fn default_tenant() -> Self {
        Self(Self::DEFAULT.to_owned())
    }

    /// A named tenant; the same rules as a task id, but never `*` (which
    /// stands for every tenant where keys are made).
    pub fn parse(raw: &str) -> Result<Self, InvalidId> {
        if raw == "*" {
            return Err(InvalidId("must name one tenant (* means every tenant)"));
        }
        TaskId::parse(raw).map(|id| Self(id.0))
    }

    pub fn is_default(&self) -> bool {
        self.0 == Self::DEFAULT
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_id_accepts_printable_ascii_up_to_128() {
        assert!(TaskId::parse("a").is_ok());
        assert!(TaskId::parse(&"x".repeat(128)).is_ok());
        assert!(TaskId::parse("tool-call:42/{\"x\"}~").is_ok());
    }

    #[test]
    fn new_tasks_cannot_be_named_like_path_segments_urls_resolve() {
        for refused in [".", ".."] {
            let id = TaskId::parse(refused).expect("well-formed");
            assert!(id.check_new().is_err(), "{refused}");
        }
        for allowed in ["...", ".a", "a.", "a..b", "x"] {
            let id = TaskId::parse(allowed).expect("well-formed");
            assert_eq!(id.check_new(), Ok(()), "{allowed}");
        }
    }

    #[test]
    fn task_id_rejects_empty_long_spaces_controls_and_non_ascii() {
        for bad in ["", " ", "a b", "tab\there", "nl\n", "é", "\u{7f}"] {
            assert!(TaskId::parse(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(TaskId::parse(&"x".repeat(129)).is_err());
    }

    #[test]
    fn generated_ids_are_128_bit_hex_and_distinct() {
        let ids: std::collections::HashSet<_> = (0..1000)
            .map(|_| TaskId::generate().expect("os randomness"))
            .collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            assert_eq!(id.as_str().len(), 32);
            assert!(id.as_str().bytes().all(|b| b.is_ascii_hexdigit()));
            assert!(TaskId::parse(id.as_str()).is_ok());
        }
    }

    #[test]
    fn session_id_limits() {
        assert!(SessionId::parse("s-1", 256).is_ok());
        assert!(SessionId::parse("sessão", 256).is_ok());
        assert!(SessionId::parse("", 256).is_err());
        assert!(SessionId::parse("a\u{0}b", 256).is_err());
        assert!(SessionId::parse(&"x".repeat(257), 256).is_err());
        assert!(SessionId::parse(&"x".repeat(256), 256).is_ok());
    }
}
