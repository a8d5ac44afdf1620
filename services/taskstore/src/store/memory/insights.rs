//! The dashboard's reads in memory (and so on SQLite, whose engine this
//! is): under the one lock, with the rules of `domain::search` and
//! `domain::overview`. A search examines at most [`SEARCH_SCAN_LIMIT`]
//! tasks: the newest after the page's position are picked with a partial
//! sort, then filtered with [`TaskSearch::matches`].

use std::cmp::Ordering;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::MemoryTaskStore;
use super::state::{Record, State, key};
use crate::domain::{
    Activity, ActivitySample, MAX_WAITING_QUESTIONS, Overview, OverviewCounts, OverviewWindow,
    SEARCH_SCAN_LIMIT, SearchPage, SearchPosition, SearchResults, SessionSummary, TaskDetails,
    TaskId, TaskResult, TaskSearch, TaskStatus, TenantId, TraceContext, WaitingQuestion,
    epoch_minute, summarise_sessions,
};
use crate::error::StoreError;
use crate::store::TaskInsights;

/// Newest first: creation time, then id, both descending.
fn newest_first(a: &&Record, b: &&Record) -> Ordering {
    (b.task.created_at, &b.task.task_id).cmp(&(a.task.created_at, &a.task.task_id))
}

/// The worker (or holder) whose lease the task is under: the current or
/// last attempt's, as PostgreSQL's `lease_owner`.
/// The tenant's unexpired tasks as of the store's `now`: what every read
/// here starts from.
fn live_tasks<'a>(
    state: &'a State,
    tenant: &'a TenantId,
    now: DateTime<Utc>,
) -> impl Iterator<Item = &'a Record> {
    state
        .tasks
        .iter()
        .filter(move |((owner, _), record)| owner == tenant.as_str() && record.is_live(now))
        .map(|(_, record)| record)
}

fn lease_owner(record: &Record) -> Option<&str> {
    record.lease().map(|lease| lease.owner.as_str())
}

/// The memory store answers the dashboard itself.
impl crate::store::InsightsSource for MemoryTaskStore {
    fn insights_reader(store: &std::sync::Arc<Self>) -> std::sync::Arc<dyn TaskInsights> {
        store.clone()
    }
}

#[async_trait]
impl TaskInsights for MemoryTaskStore {
    async fn search_tasks(
        &self,
        tenant: &TenantId,
        search: &TaskSearch,
        page: &SearchPage,
    ) -> Result<SearchResults, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        let mut scanned: Vec<&Record> = live_tasks(&state, tenant, now)
            .filter(|record| {
                page.after
                    .as_ref()
                    .is_none_or(|after| after.is_before(&record.task))
            })
            .collect();
        let limit = SEARCH_SCAN_LIMIT as usize;
        if scanned.len() > limit {
            scanned.select_nth_unstable_by(limit, newest_first);
            scanned.truncate(limit);
        }
        scanned.sort_unstable_by(newest_first);
        let matched = scanned
            .iter()
            .filter(|record| search.matches(&record.task, lease_owner(record)))
            .take(page.limit() as usize + 1)
            .map(|record| record.task.clone())
            .collect();
        Ok(
            SearchResults::filled(matched, page).unwrap_or_else(|matched| {
                SearchResults::scan_ended(
                    matched,
                    scanned.len() as u64,
                    scanned
                        .last()
                        .map(|record| SearchPosition::of(&record.task)),
                )
            }),
        )
    }

    async fn overview(
        &self,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> Result<Overview, StoreError> {
        let mut counts = OverviewCounts::new(now);
        let window = counts.window();
        let mut state = self.lock().await;
        let store_now = state.now();
        for record in live_tasks(&state, tenant, store_now) {
            let task = &record.task;
            counts.add_status(task.status, 1);
            if task.status.is_terminal() {
                counts.add_finished(epoch_minute(task.last_updated_at), 1);
            } else {
                counts.add_open_questions(record.open_requests().len() as u64);
            }
            if task.status == TaskStatus::Failed && task.last_updated_at >= window.failures_from {
                counts.add_failures(task.tool.clone(), 1);
            }
            counts.add_created(epoch_minute(task.created_at), 1);
        }
        Ok(counts.finish())
    }

    async fn tool_activity(
        &self,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> Result<Activity, StoreError> {
        let since = OverviewWindow::at(now).failures_from;
        let mut state = self.lock().await;
        let store_now = state.now();
        let mut sample = ActivitySample::default();
        let finished = live_tasks(&state, tenant, store_now).filter(|record| {
            record.task.status.is_terminal() && record.task.last_updated_at >= since
        });
        for record in finished {
            let task = &record.task;
            let took = (task.last_updated_at - task.created_at).num_milliseconds();
            sample.add(
                task.last_updated_at,
                task.tool.clone(),
                task.status,
                u64::try_from(took).unwrap_or(0),
            );
        }
        Ok(sample.finish(false))
    }

    async fn waiting_questions(
        &self,
        tenant: &TenantId,
        limit: u32,
    ) -> Result<Vec<WaitingQuestion>, StoreError> {
        let limit = limit.min(MAX_WAITING_QUESTIONS) as usize;
        let mut state = self.lock().await;
        let now = state.now();
        let mut waiting: Vec<(&Record, usize)> = live_tasks(&state, tenant, now)
            .filter(|record| !record.task.status.is_terminal())
            .flat_map(|record| {
                record
                    .questions
                    .iter()
                    .enumerate()
                    .filter(|(_, question)| question.answer.is_none())
                    .map(move |(index, _)| (record, index))
            })
            .collect();
        waiting.sort_unstable_by(|(a, i), (b, j)| {
            let (qa, qb) = (&a.questions[*i], &b.questions[*j]);
            (qa.asked_at, &a.task.task_id, &qa.key).cmp(&(qb.asked_at, &b.task.task_id, &qb.key))
        });
        Ok(waiting
            .into_iter()
            .take(limit)
            .map(|(record, index)| WaitingQuestion {
                task: record.task.clone(),
                question: record.questions[index].clone(),
            })
            .collect())
    }

    async fn task_details(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
    ) -> Result<TaskDetails, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        let record = state
            .tasks
            .get(&key(tenant.as_str(), task_id))
            .filter(|record| record.is_live(now))
            .ok_or(StoreError::NotFound)?;
        let finished = matches!(
            record.task.status,
            TaskStatus::Completed | TaskStatus::Failed
        );
        let lease = record.lease();
        Ok(TaskDetails {
            task: record.task.clone(),
            request_json: record.request.as_str().to_owned(),
            result: record
                .result
                .as_ref()
                .filter(|_| finished)
                .map(|result| TaskResult {
                    task: record.task.clone(),
                    result: result.clone(),
                }),
            questions: record.questions.clone(),
            attempt: record.dispatch.as_ref().map_or(0, |d| d.attempt),
            max_attempts: record.dispatch.as_ref().map(|d| d.max_attempts),
            lease_owner: lease.map(|lease| lease.owner.clone()),
            lease_expires_at: lease.map(|lease| lease.expires_at),
            trace: record
                .trace_context
                .as_deref()
                .and_then(TraceContext::parse),
            attempts: record.attempts.records.clone(),
            attempts_dropped: record.attempts.dropped,
        })
    }

    async fn sessions(
        &self,
        tenant: &TenantId,
        limit: u32,
    ) -> Result<Vec<SessionSummary>, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        let live = live_tasks(&state, tenant, now).map(|record| &record.task);
        Ok(summarise_sessions(live, limit))
    }
}
