//! Searches on PostgreSQL, newest first: the scan reads at most
//! [`SEARCH_SCAN_LIMIT`] of the tenant's unexpired tasks after the page's
//! position, backwards along the listing index `(tenant_id, created_at,
//! task_id)`, and the filters (`TaskSearch::matches` restated in SQL) pick
//! the page among them. A page that the scan's end cut short says so, and
//! the next continues after the last task examined.

use chrono::{DateTime, Utc};
use sqlx::{Postgres, QueryBuilder};

use super::error::bounded_read_error;
use super::insights::{PgInsights, corrupt};
use super::rows::{TaskRow, task_columns};
use crate::domain::{
    SEARCH_SCAN_LIMIT, SearchPage, SearchPosition, SearchResults, TaskId, TaskSearch, TenantId,
};
use crate::error::StoreError;

/// Newest first, the order of every search.
const NEWEST_FIRST: &str = " ORDER BY created_at DESC, task_id DESC";

/// The unexpired tasks of the tenant after the page's position, newest
/// first, at most [`SEARCH_SCAN_LIMIT`] (`columns` of them).
fn push_scan(
    query: &mut QueryBuilder<'static, Postgres>,
    columns: &str,
    tenant: &TenantId,
    page: &SearchPage,
) {
    query
        .push("SELECT ")
        .push(columns)
        .push(" FROM tasks WHERE tenant_id = ")
        .push_bind(tenant.as_str().to_owned())
        .push(concat!(" AND ", live!()));
    if let Some(after) = &page.after {
        query
            .push(" AND (created_at, task_id) < (")
            .push_bind(after.created_at)
            .push(", ")
            .push_bind(after.task_id.as_str().to_owned())
            .push(")");
    }
    query
        .push(NEWEST_FIRST)
        .push(" LIMIT ")
        .push_bind(i64::from(SEARCH_SCAN_LIMIT));
}

/// `text` as a LIKE pattern that matches it literally anywhere (escape
/// character `!`).
fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '!' | '%' | '_') {
            pattern.push('!');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// `TaskSearch::matches`, restated in SQL over the scanned rows.
fn push_filters(query: &mut QueryBuilder<'static, Postgres>, search: &TaskSearch) {
    if !search.statuses.is_empty() {
        let names: Vec<String> = search
            .statuses
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect();
        query.push(" AND status = ANY(").push_bind(names).push(")");
    }
    if let Some(tool) = &search.tool {
        query
            .push(" AND tool = ")
            .push_bind(tool.as_str().to_owned());
    }
    if let Some(session) = &search.session {
        query
            .push(" AND session_id = ")
            .push_bind(session.as_str().to_owned());
    }
    if let Some(worker) = &search.worker {
        query
            .push(" AND lease_owner = ")
            .push_bind(worker.as_str().to_owned());
    }
    if let Some(from) = search.created_from {
        query.push(" AND created_at >= ").push_bind(from);
    }
    if let Some(until) = search.created_until {
        query.push(" AND created_at < ").push_bind(until);
    }
    if let Some(prefix) = &search.id_prefix {
        // Ids are printable ASCII (below 0x7f): those starting with the
        // prefix are exactly those from it up to it followed by 0x7f, in
        // byte order. No pattern, so no character is special.
        query
            .push(" AND task_id >= ")
            .push_bind(prefix.as_str().to_owned())
            .push(" COLLATE \"C\" AND task_id < ")
            .push_bind(format!("{}\u{7f}", prefix.as_str()))
            .push(" COLLATE \"C\"");
    }
    if let Some(text) = &search.message {
        query
            .push(" AND status_message ILIKE ")
            .push_bind(contains_pattern(text.as_str()))
            .push(" ESCAPE '!'");
    }
}

/// The page: the tasks among the scanned ones that match, newest first,
/// one more than the page holds (it tells whether another follows).
pub(super) fn page_query(
    tenant: &TenantId,
    search: &TaskSearch,
    page: &SearchPage,
) -> QueryBuilder<'static, Postgres> {
    let mut query = QueryBuilder::<Postgres>::new("WITH scan AS MATERIALIZED (");
    push_scan(
        &mut query,
        concat!(task_columns!(), ", lease_owner"),
        tenant,
        page,
    );
    query.push(concat!(
        ") SELECT ",
        task_columns!(),
        " FROM scan WHERE true"
    ));
    push_filters(&mut query, search);
    query
        .push(NEWEST_FIRST)
        .push(" LIMIT ")
        .push_bind(i64::from(page.limit()) + 1);
    query
}

/// How far the scan went: how many tasks it examined, and the last.
pub(super) fn scan_end_query(
    tenant: &TenantId,
    page: &SearchPage,
) -> QueryBuilder<'static, Postgres> {
    let mut query = QueryBuilder::<Postgres>::new(
        "SELECT count(*) OVER () AS examined, created_at, task_id FROM (",
    );
    push_scan(&mut query, "created_at, task_id", tenant, page);
    query.push(") scan ORDER BY created_at, task_id LIMIT 1");
    query
}

#[derive(sqlx::FromRow)]
struct ScanEndRow {
    examined: i64,
    created_at: DateTime<Utc>,
    task_id: String,
}

impl PgInsights {
    /// [`TaskInsights::search_tasks`]: the page among the first
    /// [`SEARCH_SCAN_LIMIT`] tasks after its position.
    pub(super) async fn search(
        &self,
        tenant: &TenantId,
        search: &TaskSearch,
        page: &SearchPage,
    ) -> Result<SearchResults, StoreError> {
        let mut tx = self.begin().await?;
        let rows: Vec<TaskRow> = page_query(tenant, search, page)
            .build_query_as()
            .fetch_all(&mut *tx)
            .await
            .map_err(bounded_read_error)?;
        let matched = rows
            .into_iter()
            .map(TaskRow::into_task)
            .collect::<Result<Vec<_>, _>>()?;
        let results = match SearchResults::filled(matched, page) {
            Ok(full) => full,
            Err(matched) => {
                // Fewer than a page matched: how far did the scan go? The
                // same scan again, in the same snapshot.
                let end: Option<ScanEndRow> = scan_end_query(tenant, page)
                    .build_query_as()
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(bounded_read_error)?;
                let (examined, last) = match end {
                    Some(end) => {
                        let task_id =
                            TaskId::parse(&end.task_id).map_err(|_| corrupt("task id"))?;
                        let last = SearchPosition {
                            created_at: end.created_at,
                            task_id,
                        };
                        (u64::try_from(end.examined).unwrap_or(0), Some(last))
                    }
                    None => (0, None),
                };
                SearchResults::scan_ended(matched, examined, last)
            }
        };
        PgInsights::finish(tx).await?;
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::contains_pattern;

    #[test]
    fn like_metacharacters_are_literal() {
        assert_eq!(contains_pattern("disk"), "%disk%");
        assert_eq!(contains_pattern("50%_off!"), "%50!%!_off!!%");
    }
}
