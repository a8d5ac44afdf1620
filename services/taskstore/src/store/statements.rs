//! Every SQL statement the stores run is written through [`sql!`], which
//! registers it (in test builds only) with where it is written, so that
//! one test prepares each against a freshly migrated schema before any
//! suite runs it, and names the one that fails (`tests` below). A
//! statement is text fixed at compile time (literals, `concat!` and the
//! condition macros of `postgres/conditions.rs`); the few that must stay
//! dynamic are listed in `tests` with the reason.

/// The database a statement is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    Sqlite,
}

/// A registered statement.
#[derive(Debug)]
pub struct Statement {
    pub dialect: Dialect,
    pub text: &'static str,
    /// `file:line` of the `sql!` that wrote it.
    pub at: &'static str,
}

#[cfg(test)]
inventory::collect!(Statement);

/// The statement `$text` (a constant expression), registered for the
/// statement check: `sql!("SELECT …")` for PostgreSQL, `sql!(Sqlite:
/// "…")` for the SQLite file.
macro_rules! sql {
    ($dialect:ident : $text:expr) => {{
        const TEXT: &str = $text;
        #[cfg(test)]
        inventory::submit! {
            $crate::store::statements::Statement {
                dialect: $crate::store::statements::Dialect::$dialect,
                text: TEXT,
                at: concat!(file!(), ":", line!()),
            }
        }
        TEXT
    }};
    ($text:expr) => {
        $crate::store::statements::sql!(Postgres: $text)
    };
}
pub(crate) use sql;

#[cfg(test)]
mod tests;
