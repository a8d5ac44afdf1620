//! sqlx errors to [`StoreError`], in one place. The cause is logged here, with
//! the caller's span as context; the error that travels on carries only a
//! message that is safe to show a client.

use sqlx::error::DatabaseError;

use crate::error::StoreError;

pub(crate) fn store_error(err: sqlx::Error) -> StoreError {
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
    // 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown,
    // cannot connect now; 53300: too many connections; 40001/40P01:
    // serialization failure and deadlock, which a retry resolves.
    code.starts_with("08")
        || matches!(
            &*code,
            "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01"
        )
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
