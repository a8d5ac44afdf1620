//! The dashboard's boundary: read-only questions about one tenant's tasks,
//! every one bounded (page size, rows examined; PostgreSQL adds a statement
//! timeout and a pool of its own), so that a browser cannot starve the API.
//! Every backend implements it; the conformance suite proves them alike.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::{
    Activity, Overview, SearchPage, SearchResults, SessionSummary, TaskDetails, TaskId, TaskSearch,
    TenantId, WaitingQuestion,
};
use crate::error::StoreError;

#[async_trait]
pub trait TaskInsights: Send + Sync + 'static {
    /// The unexpired tasks of `tenant` matching `search`, newest first
    /// (creation time, then id, both descending), one keyset page.
    async fn search_tasks(
        &self,
        tenant: &TenantId,
        search: &TaskSearch,
        page: &SearchPage,
    ) -> Result<SearchResults, StoreError>;

    /// The tenant at a glance, as of `now`.
    async fn overview(&self, tenant: &TenantId, now: DateTime<Utc>)
    -> Result<Overview, StoreError>;

    /// How each tool fared in the hour before `now`: the most recently
    /// finished tasks' ends and durations (`domain::tool_activity`).
    async fn tool_activity(
        &self,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> Result<Activity, StoreError>;

    /// The open questions of the tenant's unexpired tasks, oldest first, at
    /// most `limit` (capped at `MAX_WAITING_QUESTIONS`).
    async fn waiting_questions(
        &self,
        tenant: &TenantId,
        limit: u32,
    ) -> Result<Vec<WaitingQuestion>, StoreError>;

    /// One task of the tenant with its request, result, questions and
    /// attempt; NOT_FOUND as for every other operation.
    async fn task_details(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
    ) -> Result<TaskDetails, StoreError>;

    /// The tenant's MCP sessions that have unexpired tasks, the most
    /// recently active first, at most `limit` (capped at `MAX_SESSIONS`).
    async fn sessions(
        &self,
        tenant: &TenantId,
        limit: u32,
    ) -> Result<Vec<SessionSummary>, StoreError>;
}

/// Where a store answers the dashboard: the memory store itself; the
/// PostgreSQL store through its [`crate::store::postgres::PgInsights`], on
/// a pool of their own.
pub trait InsightsSource {
    fn insights_reader(store: &Arc<Self>) -> Arc<dyn TaskInsights>;
}
