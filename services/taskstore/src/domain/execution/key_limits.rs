//! Limits per key: a tool declares "at most N of my tasks run at once per
//! key" ([`ConcurrencyLimit`]) and "at most N of my tasks start per window
//! per key" ([`RateLimit`]), where a key is an expression over the task's
//! tenant, tool, session and paths into its arguments. A declaration is
//! parsed once, where it enters (a worker's heartbeat, a tools file); each
//! task's keys are computed once, when it is created, and kept with the
//! task, so the dispatch decision only compares strings.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// One term of a key expression.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Term {
    Tenant,
    Tool,
    Session,
    /// A path into the call's arguments (`arguments.customer.id`).
    Argument(Vec<String>),
}

/// A key expression: terms separated by commas (`tenant,
/// arguments.customer_id`); empty is one key for the whole tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyExpr {
    terms: Vec<Term>,
}

/// A declared limit: at most `max` tasks of the tool run at once per value
/// of `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConcurrencyLimit {
    pub max: u32,
    pub key: KeyExpr,
}

/// One task's limit: its key's value and the most that may run at once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyLimit {
    /// The key's value (`tenant=acme,arguments.customer_id="c1"`), at most
    /// [`KeyLimit::MAX_KEY_BYTES`]; a longer one is replaced by its digest.
    pub key: String,
    pub max: u32,
}

/// Why a declared limit was refused (the caller names which).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidKeyLimit {
    #[error("max must be between 1 and {}", ConcurrencyLimit::MAX)]
    Max,
    #[error("key must be at most {} characters", KeyExpr::MAX_CHARS)]
    TooLong,
    #[error(
        "key term {0:?} is not tenant, tool, session or arguments.<path> (at most {depth} names of A-Z a-z 0-9 _ -)",
        depth = KeyExpr::MAX_DEPTH
    )]
    Term(String),
    #[error("key has more than {} terms", KeyExpr::MAX_TERMS)]
    TooManyTerms,
    #[error("starts must be between 1 and {}", RateLimit::MAX_STARTS)]
    Starts,
    #[error("per must be between 10ms and 24h")]
    Per,
}

impl KeyExpr {
    pub const MAX_CHARS: usize = 256;
    pub const MAX_TERMS: usize = 8;
    pub const MAX_DEPTH: usize = 8;

    pub fn parse(raw: &str) -> Result<Self, InvalidKeyLimit> {
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(InvalidKeyLimit::TooLong);
        }
        let raw = raw.trim();
        if raw.is_empty() {
            return Ok(Self { terms: Vec::new() });
        }
        let terms = raw
            .split(',')
            .map(|term| Self::term(term.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        if terms.len() > Self::MAX_TERMS {
            return Err(InvalidKeyLimit::TooManyTerms);
        }
        Ok(Self { terms })
    }

    fn term(raw: &str) -> Result<Term, InvalidKeyLimit> {
        let refuse = || InvalidKeyLimit::Term(raw.to_owned());
        match raw {
            "tenant" => return Ok(Term::Tenant),
            "tool" => return Ok(Term::Tool),
            "session" => return Ok(Term::Session),
            _ => {}
        }
        let path = raw.strip_prefix("arguments.").ok_or_else(refuse)?;
        let names: Vec<String> = path.split('.').map(str::to_owned).collect();
        let name_ok = |name: &String| {
            !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if names.len() > Self::MAX_DEPTH || !names.iter().all(name_ok) {
            return Err(refuse());
        }
        Ok(Term::Argument(names))
    }

    /// Whether it has no terms: one key for the whole tool.
    pub fn is_whole_tool(&self) -> bool {
        self.terms.is_empty()
    }

    /// The expression as written (normalised).
    pub fn source(&self) -> String {
        self.terms
            .iter()
            .map(|term| match term {
                Term::Tenant => "tenant".to_owned(),
                Term::Tool => "tool".to_owned(),
                Term::Session => "session".to_owned(),
                Term::Argument(path) => format!("arguments.{}", path.join(".")),
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// What a key is computed from: one task's create.
#[derive(Debug, Clone, Copy)]
pub struct KeyInputs<'a> {
    pub tenant: &'a str,
    pub tool: &'a str,
    pub session: Option<&'a str>,
    /// The call's arguments (`params.arguments`; `Null` when there are
    /// none).
    pub arguments: &'a Value,
}

impl ConcurrencyLimit {
    pub const MAX: u32 = 10_000;

    pub fn parse(max: u32, key: &str) -> Result<Self, InvalidKeyLimit> {
        if !(1..=Self::MAX).contains(&max) {
            return Err(InvalidKeyLimit::Max);
        }
        Ok(Self {
            max,
            key: KeyExpr::parse(key)?,
        })
    }

    /// At most `max` per tenant: an operator's limit for a tool whose
    /// workers declare none.
    pub fn per_tenant(max: u32) -> Self {
        Self {
            max,
            key: KeyExpr {
                terms: vec![Term::Tenant],
            },
        }
    }

    /// The key of one task ([`KeyExpr::value_of`]) under this limit.
    pub fn key_of(&self, inputs: KeyInputs<'_>) -> KeyLimit {
        KeyLimit {
            key: self.key.value_of(inputs),
            max: self.max,
        }
    }
}

/// A declared rate: at most `starts` of the tool's tasks start within any
/// `per` per value of `key` (counted when the dispatcher sends a job).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    pub starts: u32,
    pub per: Duration,
    pub key: KeyExpr,
}

/// One task's rate: its key's value and the key's allowance.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaskRate {
    pub key: String,
    pub starts: u32,
    pub per: Duration,
}

impl RateLimit {
    pub const MAX_STARTS: u32 = 100_000;
    const MIN_PER: Duration = Duration::from_millis(10);
    const MAX_PER: Duration = Duration::from_secs(24 * 3600);

    pub fn parse(starts: u32, per: Duration, key: &str) -> Result<Self, InvalidKeyLimit> {
        if !(1..=Self::MAX_STARTS).contains(&starts) {
            return Err(InvalidKeyLimit::Starts);
        }
        if !(Self::MIN_PER..=Self::MAX_PER).contains(&per) {
            return Err(InvalidKeyLimit::Per);
        }
        Ok(Self {
            starts,
            per,
            key: KeyExpr::parse(key)?,
        })
    }

    /// The key of one task under this rate.
    pub fn key_of(&self, inputs: KeyInputs<'_>) -> TaskRate {
        TaskRate {
            key: self.key.value_of(inputs),
            starts: self.starts,
            per: self.per,
        }
    }
}

impl KeyExpr {
    /// The key of one task: each term's value, in the order declared. A
    /// path that is missing (or runs into a non-object) gives `null`: such
    /// tasks share one key, and still run under the limit. A value longer
    /// than [`KeyLimit::MAX_KEY_BYTES`] is kept as its SHA-256.
    pub fn value_of(&self, inputs: KeyInputs<'_>) -> String {
        let mut key = String::new();
        for (i, term) in self.terms.iter().enumerate() {
            if i > 0 {
                key.push(',');
            }
            let _ = match term {
                Term::Tenant => write!(key, "tenant={}", quoted(inputs.tenant)),
                Term::Tool => write!(key, "tool={}", quoted(inputs.tool)),
                Term::Session => write!(
                    key,
                    "session={}",
                    inputs.session.map_or_else(|| "null".to_owned(), quoted)
                ),
                Term::Argument(path) => {
                    let value = path
                        .iter()
                        .try_fold(inputs.arguments, |at, name| at.get(name))
                        .unwrap_or(&Value::Null);
                    write!(key, "arguments.{}={value}", path.join("."))
                }
            };
        }
        KeyLimit::new(key, 0).key
    }
}

impl KeyLimit {
    pub const MAX_KEY_BYTES: usize = 256;

    /// A key longer than [`KeyLimit::MAX_KEY_BYTES`] is kept as its
    /// SHA-256: distinct values stay distinct keys.
    pub fn new(key: String, max: u32) -> Self {
        let key = if key.len() > Self::MAX_KEY_BYTES {
            let digest = Sha256::digest(key.as_bytes());
            let mut hex = String::from("sha256:");
            for byte in digest {
                let _ = write!(hex, "{byte:02x}");
            }
            hex
        } else {
            key
        };
        Self { key, max }
    }
}

fn quoted(raw: &str) -> String {
    Value::String(raw.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn inputs(arguments: &Value) -> KeyInputs<'_> {
        KeyInputs {
            tenant: "acme",
            tool: "fetch",
            session: Some("s1"),
            arguments,
        }
    }

    #[test]
    fn keys_are_the_declared_terms_values_in_order() {
        let arguments = json!({"customer": {"id": "c1"}, "n": 3});
        let cases = [
            ("", ""),
            ("tenant", r#"tenant="acme""#),
            (
                " tenant , arguments.customer.id ",
                r#"tenant="acme",arguments.customer.id="c1""#,
            ),
            ("tool,session", r#"tool="fetch",session="s1""#),
            ("arguments.n", "arguments.n=3"),
            ("arguments.missing.deep", "arguments.missing.deep=null"),
            (
                "arguments.n.below_a_number",
                "arguments.n.below_a_number=null",
            ),
        ];
        for (expr, key) in cases {
            let limit = ConcurrencyLimit::parse(2, expr).expect(expr);
            assert_eq!(limit.key_of(inputs(&arguments)).key, key, "{expr}");
        }
    }

    #[test]
    fn bad_declarations_are_refused() {
        let deep = format!("arguments.{}", ["a"; 9].join("."));
        let many = ["tenant"; 9].join(",");
        let long = format!("arguments.{}", "a".repeat(300));
        let cases: [(u32, &str); 9] = [
            (0, "tenant"),
            (10_001, "tenant"),
            (1, "customer_id"),
            (1, "arguments."),
            (1, "arguments.a..b"),
            (1, "arguments.a b"),
            (1, &deep),
            (1, &many),
            (1, &long),
        ];
        for (max, expr) in cases {
            assert!(ConcurrencyLimit::parse(max, expr).is_err(), "{max} {expr}");
        }
        assert_eq!(
            ConcurrencyLimit::parse(3, "tenant,arguments.a-b_c")
                .expect("valid")
                .key
                .source(),
            "tenant,arguments.a-b_c"
        );
    }

    #[test]
    fn rates_are_bounded_and_keyed_like_limits() {
        let second = Duration::from_secs(1);
        assert_eq!(
            RateLimit::parse(0, second, ""),
            Err(InvalidKeyLimit::Starts)
        );
        assert_eq!(
            RateLimit::parse(100_001, second, ""),
            Err(InvalidKeyLimit::Starts)
        );
        assert_eq!(
            RateLimit::parse(5, Duration::from_millis(9), ""),
            Err(InvalidKeyLimit::Per)
        );
        assert_eq!(
            RateLimit::parse(5, Duration::from_secs(24 * 3600 + 1), ""),
            Err(InvalidKeyLimit::Per)
        );
        assert!(RateLimit::parse(5, second, "nope").is_err());
        let rate = RateLimit::parse(20, second, "tenant").expect("valid");
        let arguments = json!({});
        assert_eq!(
            rate.key_of(inputs(&arguments)),
            TaskRate {
                key: r#"tenant="acme""#.into(),
                starts: 20,
                per: second
            }
        );
    }

    #[test]
    fn long_keys_are_kept_as_distinct_digests() {
        let limit = ConcurrencyLimit::parse(1, "arguments.text").expect("valid");
        let one = json!({"text": "x".repeat(1000)});
        let two = json!({"text": "y".repeat(1000)});
        let (one, two) = (
            limit.key_of(inputs(&one)).key,
            limit.key_of(inputs(&two)).key,
        );
        assert!(one.starts_with("sha256:") && one.len() <= KeyLimit::MAX_KEY_BYTES);
        assert_ne!(one, two);
    }
}
