//! sqlx errors to [`StoreError`], in one place. The cause is logged here, with
//! the caller's span as context; the error that travels on carries only a
//! message that is safe to show a client.

use std::time::Instant;

use sqlx::error::DatabaseError;

use crate::error::StoreError;
use crate::health::{DATABASE_SHORTAGES, Shortage};

pub(crate) fn store_error(err: sqlx::Error) -> StoreError {
    if let Some(shortage) = shortage_of(&err) {
        // Refused for want of a resource: transient for the caller, and
        // logged once per episode, not once per call (a full disk refuses
        // every write at once).
        crate::metrics::database_refusal(shortage.label);
        if DATABASE_SHORTAGES.note(shortage, Instant::now()) {
            tracing::warn!(condition = shortage.label, error = %err, "database out of resources");
        }
        return StoreError::Unavailable(format!(
            "the database is {}; retry later",
            shortage.description
        ));
    }
    if is_unavailable(&err) {
        tracing::warn!(error = %err, "database unavailable");
        StoreError::Unavailable("the database is unavailable; retry later".to_owned())
    } else {
        tracing::error!(error = %err, "database error");
        StoreError::Internal("database error".to_owned())
    }
}

/// Whether the failure is the database being out of reach (down, restarting,
/// overloaded, or the pool exhausted), as opposed to a bug.
pub(crate) fn is_unavailable(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => is_unavailable_sqlstate(db.as_ref()),
        // A peer that vanishes while a connection negotiates TLS (a
        // restarting database, a proxy with no backend) breaks the
        // handshake rather than the socket.
        sqlx::Error::Protocol(message) => message.contains("SSLRequest"),
        _ => false,
    }
}

fn is_unavailable_sqlstate(db: &dyn DatabaseError) -> bool {
    let Some(code) = db.code() else {
        return false;
    };
    // 08: connection exception; 53: insufficient resources (see
    // `shortage`); 57P01-57P03: admin shutdown, crash shutdown, cannot
    // connect now; 40001/40P01: serialization failure and deadlock, which a
    // retry resolves.
    code.starts_with("08")
        || code.starts_with("53")
        || matches!(&*code, "57P01" | "57P02" | "57P03" | "40001" | "40P01")
}

/// The resource PostgreSQL ran out of, for an error of SQLSTATE class 53
/// (insufficient resources).
pub(crate) fn shortage_of(err: &sqlx::Error) -> Option<Shortage> {
    let sqlx::Error::Database(db) = err else {
        return None;
    };
    shortage_of_sqlstate(&db.code()?)
}

fn shortage_of_sqlstate(code: &str) -> Option<Shortage> {
    let (label, description) = match code {
        "53100" => ("disk_full", "out of disk space"),
        "53200" => ("out_of_memory", "out of memory"),
        "53300" => ("too_many_connections", "out of connections"),
        "53400" => (
            "configuration_limit_exceeded",
            "at a configured limit (e.g. temp_file_limit)",
        ),
        other if other.starts_with("53") => ("insufficient_resources", "out of resources"),
        _ => return None,
    };
    Some(Shortage { label, description })
}

/// As [`store_error`], for the dashboard's bounded reads (`insights`): a
/// statement cut off by its `statement_timeout` (57014, query_canceled) or
/// a wait for one of their few connections is UNAVAILABLE, saying so: the
/// database is fine, the question was too costly or too many were asked at
/// once.
pub(crate) fn bounded_read_error(err: sqlx::Error) -> StoreError {
    let canceled =
        matches!(&err, sqlx::Error::Database(db) if db.code().as_deref() == Some("57014"));
    if canceled {
        tracing::warn!(error = %err, "dashboard query ran out of time");
        StoreError::Unavailable(
            "the query took too long and was stopped; narrow the search or retry later".to_owned(),
        )
    } else if matches!(err, sqlx::Error::PoolTimedOut) {
        tracing::warn!("no connection free for a dashboard query");
        StoreError::Unavailable("too many dashboard queries at once; retry later".to_owned())
    } else {
        store_error(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_53_names_what_ran_out() {
        let label = |code| shortage_of_sqlstate(code).map(|s| s.label);
        assert_eq!(label("53100"), Some("disk_full"));
        assert_eq!(label("53200"), Some("out_of_memory"));
        assert_eq!(label("53300"), Some("too_many_connections"));
        assert_eq!(label("53400"), Some("configuration_limit_exceeded"));
        assert_eq!(label("53000"), Some("insufficient_resources"));
        assert_eq!(label("23505"), None);
        assert_eq!(label("08006"), None);
    }
}
