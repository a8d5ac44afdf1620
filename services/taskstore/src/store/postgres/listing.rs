//! ListTasks on PostgreSQL: keyset pages on (created_at, task_id), with the
//! session and filter applied in the query, behind signed cursors.

use sqlx::{Postgres, QueryBuilder};

use super::PgTaskStore;
use super::error::store_error;
use super::rows::{TaskRow, task_columns};
use crate::domain::{CursorPosition, PageRequest, Scope, TaskFilter, TaskPage};
use crate::error::StoreError;

impl PgTaskStore {
    /// One page of the tasks visible in `scope`.
    pub(super) async fn page(
        &self,
        scope: &Scope,
        page: PageRequest,
    ) -> Result<TaskPage, StoreError> {
        let after = page
            .cursor
            .as_deref()
            .map(|cursor| self.cursors.decode(scope, &page.filter, cursor))
            .transpose()?;
        let size = self.config.paging.resolve(page.page_size);

        let mut rows: Vec<TaskRow> = page_query(scope, &page.filter, after.as_ref(), size)
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(store_error)?;

        let has_more = rows.len() > size as usize;
        rows.truncate(size as usize);
        let next_cursor = match (has_more, rows.last()) {
            (true, Some(last)) => Some(self.cursors.encode(scope, &page.filter, &last.position()?)),
            _ => None,
        };
        let tasks = rows
            .into_iter()
            .map(TaskRow::into_task)
            .collect::<Result<_, _>>()?;
        Ok(TaskPage { tasks, next_cursor })
    }
}

/// One page of the tasks visible in `scope` that pass `filter`, after
/// `after`: `size` rows, and one more that tells whether another page follows.
pub(super) fn page_query<'a>(
    scope: &'a Scope,
    filter: &'a TaskFilter,
    after: Option<&'a CursorPosition>,
    size: u32,
) -> QueryBuilder<'a, Postgres> {
    let mut query = QueryBuilder::<Postgres>::new(concat!(
        "SELECT ",
        task_columns!(),
        " FROM tasks WHERE tenant_id = "
    ));
    query.push_bind(scope.tenant.as_str());
    if let Some(session) = &scope.session {
        query.push(" AND session_id = ").push_bind(session.as_str());
    }
    query.push(concat!(" AND ", live!()));
    let statuses = filter.statuses();
    if !statuses.is_empty() {
        let names: Vec<&str> = statuses.iter().map(|s| s.as_str()).collect();
        query.push(" AND status = ANY(").push_bind(names).push(")");
    }
    if let Some(tool) = &filter.tool {
        query.push(" AND tool = ").push_bind(tool.as_str());
    }
    if let Some(after) = after {
        query
            .push(" AND (created_at, task_id) > (")
            .push_bind(after.created_at)
            .push(", ")
            .push_bind(after.task_id.as_str())
            .push(")");
    }
    // One extra row tells whether another page follows.
    query
        .push(" ORDER BY created_at, task_id LIMIT ")
        .push_bind(i64::from(size) + 1);
    query
}
