//! What a method answers with: a result at once, a wait under way, or an
//! event stream; and the session to announce. Every method module returns
//! it; the request layer turns it into HTTP.

use serde_json::Value;

use super::streams::Waiting;
use crate::domain::SessionId;

/// A method's answer, and the session to announce (for `initialize`).
#[derive(Debug)]
pub(super) struct Reply {
    pub body: Body,
    pub session: Option<SessionId>,
}

/// What a method answers with.
#[derive(Debug)]
pub(super) enum Body {
    /// Its result, at once.
    Json(Value),
    /// A wait under way, which may send requests first (`streams.rs`).
    Waiting(Waiting),
    /// An event stream from the start (`subscriptions/listen`).
    Stream(axum::response::Response),
}

impl From<Value> for Reply {
    fn from(result: Value) -> Self {
        Self {
            body: Body::Json(result),
            session: None,
        }
    }
}

impl Reply {
    /// The same reply, its JSON result (if it has one now) changed by `f`.
    pub(super) fn map_json(self, f: impl FnOnce(Value) -> Value) -> Self {
        Self {
            body: match self.body {
                Body::Json(result) => Body::Json(f(result)),
                other @ (Body::Waiting(_) | Body::Stream(_)) => other,
            },
            session: self.session,
        }
    }
}

impl From<Waiting> for Reply {
    fn from(waiting: Waiting) -> Self {
        Self {
            body: Body::Waiting(waiting),
            session: None,
        }
    }
}
