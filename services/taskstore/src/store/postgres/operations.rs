//! The worker registry, the outbox backlog and the health check on
//! PostgreSQL. Times come from the database clock, like everything else.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::PgTaskStore;
use super::error::store_error;
use super::rows::millis;
use crate::domain::{
    ConcurrencyLimit, KeyExpr, OutboxBacklog, RateLimit, Reach, RetryPolicy, TaskStatus,
    TaskSupport, ToolDescription, ToolName, WorkerHeartbeat, WorkerId, WorkerInfo,
};
use crate::error::StoreError;
use crate::store::operations::OperationsStore;
use crate::store::statements::sql;

/// Where a tenant-bound worker's key splits: `<tenant> U+001F <id>`
/// (migration 0016; neither id ever holds a control character).
const REACH_SEPARATOR: char = '\u{1f}';

/// The registry key of `worker` announced by `reach`.
fn registry_key(worker: &WorkerId, reach: &Reach) -> String {
    match reach {
        Reach::AllTenants => worker.as_str().to_owned(),
        Reach::Tenant(tenant) => format!("{}{REACH_SEPARATOR}{}", tenant.as_str(), worker),
    }
}

#[derive(sqlx::FromRow)]
struct WorkerRow {
    /// The registry key (`registry_key`).
    worker_id: String,
    reach: String,
    consuming: bool,
    tools: Vec<String>,
    slots: i32,
    busy: i32,
    first_seen_at: DateTime<Utc>,
    last_seen_at: DateTime<Utc>,
    /// JSON text: an array of [`StoredDescription`].
    tool_descriptions: String,
}

/// A tool description as the `workers.tool_descriptions` column keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredDescription {
    name: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: String,
    input_schema: serde_json::Value,
    task_support: String,
    /// Its declared retry policy; absent: the service's. Kept as a value
    /// so that one this build cannot read spoils only itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry: Option<serde_json::Value>,
    /// Its declared concurrency limit (`{"max": 3, "key": "tenant"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    concurrency: Option<serde_json::Value>,
    /// Its declared rate (`{"starts": 20, "perMs": 1000, "key": ""}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rate: Option<serde_json::Value>,
    /// Its declared fairness key (`"arguments.customer_id"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fairness_key: Option<String>,
}

/// A rate as the workers table keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredRate {
    starts: u32,
    per_ms: u64,
    key: String,
}

/// A concurrency limit as the workers table keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredConcurrency {
    max: u32,
    key: String,
}

impl StoredDescription {
    fn of(d: &ToolDescription) -> Result<Self, StoreError> {
        Ok(Self {
            name: d.name.to_string(),
            title: d.title.clone().unwrap_or_default(),
            description: d.description.clone().unwrap_or_default(),
            input_schema: serde_json::from_str(d.input_schema.as_str())
                .map_err(|err| StoreError::Internal(format!("a checked schema: {err}")))?,
            task_support: d.task_support.as_str().to_owned(),
            retry: (!d.retry.is_default())
                .then(|| serde_json::to_value(&d.retry))
                .transpose()
                .map_err(|err| StoreError::Internal(format!("a retry policy: {err}")))?,
            concurrency: d.concurrency.as_ref().map(|limit| {
                serde_json::json!(StoredConcurrency {
                    max: limit.max,
                    key: limit.key.source(),
                })
            }),
            rate: d.rate.as_ref().map(|rate| {
                serde_json::json!(StoredRate {
                    starts: rate.starts,
                    per_ms: u64::try_from(rate.per.as_millis()).unwrap_or(u64::MAX),
                    key: rate.key.source(),
                })
            }),
            fairness_key: d.fairness.as_ref().map(KeyExpr::source),
        })
    }

    fn into_description(self) -> Option<ToolDescription> {
        let name = ToolName::parse(&self.name).ok()?;
        let support = TaskSupport::parse(&self.task_support)?;
        let schema = self.input_schema.to_string();
        // A policy this build cannot read (a newer one's) is the service's.
        let retry = self
            .retry
            .and_then(|retry| serde_json::from_value(retry).ok())
            .and_then(|retry| RetryPolicy::parse(retry).ok())
            .unwrap_or_default();
        // One this build cannot read is no limit (and says so).
        let concurrency = self.concurrency.and_then(|raw| {
            let limit = serde_json::from_value::<StoredConcurrency>(raw)
                .ok()
                .and_then(|c| ConcurrencyLimit::parse(c.max, &c.key).ok());
            if limit.is_none() {
                tracing::warn!(tool = %self.name, "a stored concurrency limit cannot be read; the tool runs unlimited");
            }
            limit
        });
        let rate = self.rate.and_then(|raw| {
            let rate = serde_json::from_value::<StoredRate>(raw).ok().and_then(|r| {
                RateLimit::parse(r.starts, std::time::Duration::from_millis(r.per_ms), &r.key).ok()
            });
            if rate.is_none() {
                tracing::warn!(tool = %self.name, "a stored rate cannot be read; the tool runs unlimited");
            }
            rate
        });
        let fairness = self.fairness_key.and_then(|raw| {
            let key = KeyExpr::parse(&raw).ok();
            if key.is_none() {
                tracing::warn!(tool = %self.name, "a stored fairness key cannot be read; the tool's tasks go first in, first out");
            }
            key
        });
        match ToolDescription::parse(name, &self.title, &self.description, &schema, support) {
            Ok(description) => Some(
                description
                    .with_retry(retry)
                    .with_concurrency(concurrency)
                    .with_rate(rate)
                    .with_fairness(fairness),
            ),
            Err(err) => {
                // Checked when reported; jsonb may write numbers out longer.
                tracing::warn!(tool = %self.name, error = %err, "a stored tool description no longer passes its checks; listed as undescribed");
                None
            }
        }
    }
}

impl WorkerRow {
    fn into_info(self) -> Result<WorkerInfo, StoreError> {
        let corrupt = |_| StoreError::Internal("corrupt worker row".into());
        let tools = self
            .tools
            .iter()
            .map(|t| ToolName::parse(t).map_err(corrupt))
            .collect::<Result<_, _>>()?;
        let stored: Vec<StoredDescription> = serde_json::from_str(&self.tool_descriptions)
            .map_err(|_| StoreError::Internal("corrupt worker row".into()))?;
        // A description this build cannot read (written by a newer one) is
        // listed as undescribed rather than failing the whole listing.
        let descriptions = stored
            .into_iter()
            .filter_map(StoredDescription::into_description)
            .collect();
        let reach = Reach::parse(&self.reach).map_err(corrupt)?;
        let id = match reach {
            Reach::AllTenants => self.worker_id.as_str(),
            Reach::Tenant(_) => self
                .worker_id
                .split_once(REACH_SEPARATOR)
                .map_or(self.worker_id.as_str(), |(_, id)| id),
        };
        Ok(WorkerInfo {
            heartbeat: WorkerHeartbeat::new(
                WorkerId::parse(id).map_err(corrupt)?,
                tools,
                u32::try_from(self.slots).unwrap_or(0),
                u32::try_from(self.busy).unwrap_or(0),
            )
            .with_descriptions(descriptions)
            .announced_by(reach)
            .consuming(self.consuming),
            first_seen_at: self.first_seen_at,
            last_seen_at: self.last_seen_at,
        })
    }
}

#[derive(sqlx::FromRow)]
struct BacklogRow {
    jobs: i64,
    due: i64,
    oldest_due_ms: Option<f64>,
}

#[async_trait]
impl OperationsStore for PgTaskStore {
    async fn record_heartbeat(&self, heartbeat: &WorkerHeartbeat) -> Result<(), StoreError> {
        let tools: Vec<&str> = heartbeat.tools.iter().map(ToolName::as_str).collect();
        let descriptions = heartbeat
            .descriptions
            .iter()
            .map(StoredDescription::of)
            .collect::<Result<Vec<_>, _>>()?;
        let descriptions = serde_json::to_string(&descriptions)
            .map_err(|err| StoreError::Internal(format!("tool descriptions: {err}")))?;
        sqlx::query(
            sql!("INSERT INTO workers
                 (worker_id, reach, tools, slots, busy, first_seen_at, last_seen_at, tool_descriptions,
                  consuming)
             VALUES ($1, $6, $2, $3, $4, now(), now(), $5::jsonb, $7)
             ON CONFLICT (worker_id) DO UPDATE SET consuming = EXCLUDED.consuming,
                 tools = EXCLUDED.tools, slots = EXCLUDED.slots, busy = EXCLUDED.busy,
                 last_seen_at = EXCLUDED.last_seen_at,
                 tool_descriptions = EXCLUDED.tool_descriptions"),
        )
        .bind(registry_key(&heartbeat.worker_id, &heartbeat.reach))
        .bind(tools)
        .bind(i32::try_from(heartbeat.slots).unwrap_or(i32::MAX))
        .bind(i32::try_from(heartbeat.busy).unwrap_or(i32::MAX))
        .bind(descriptions)
        .bind(heartbeat.reach.to_string())
        .bind(heartbeat.consuming)
        .execute(self.pool())
        .await
        .map_err(store_error)?;
        Ok(())
    }

    async fn forget_worker(&self, worker: &WorkerId, reach: &Reach) -> Result<(), StoreError> {
        sqlx::query(sql!(
            "DELETE FROM workers WHERE worker_id = $1 AND reach = $2"
        ))
        .bind(registry_key(worker, reach))
        .bind(reach.to_string())
        .execute(self.pool())
        .await
        .map_err(store_error)?;
        Ok(())
    }

    async fn workers(&self, within: Duration) -> Result<Vec<WorkerInfo>, StoreError> {
        sqlx::query_as::<_, WorkerRow>(sql!(
            "SELECT worker_id, reach, consuming, tools, slots, busy, first_seen_at, last_seen_at,
                    tool_descriptions::text AS tool_descriptions
             FROM workers
             WHERE last_seen_at > now() - $1 * interval '1 millisecond'
             ORDER BY worker_id"
        ))
        .bind(millis(within))
        .fetch_all(self.pool())
        .await
        .map_err(store_error)?
        .into_iter()
        .map(WorkerRow::into_info)
        .collect()
    }

    async fn forget_silent_workers(&self, unseen_for: Duration) -> Result<u64, StoreError> {
        let deleted = sqlx::query(sql!(
            "DELETE FROM workers WHERE last_seen_at <= now() - $1 * interval '1 millisecond'"
        ))
        .bind(millis(unseen_for))
        .execute(self.pool())
        .await
        .map_err(store_error)?
        .rows_affected();
        Ok(deleted)
    }

    async fn tasks_by_status(&self) -> Result<Vec<(TaskStatus, u64)>, StoreError> {
        let rows: Vec<(String, i64)> = sqlx::query_as(sql!(concat!(
            "SELECT status, count(*) FROM tasks WHERE ",
            live!(),
            " GROUP BY status"
        )))
        .fetch_all(self.pool())
        .await
        .map_err(store_error)?;
        rows.into_iter()
            .map(|(status, count)| {
                let status = status
                    .parse()
                    .map_err(|_| StoreError::Internal("corrupt task row".into()))?;
                Ok((status, u64::try_from(count).unwrap_or(0)))
            })
            .collect()
    }

    async fn outbox_backlog(&self) -> Result<OutboxBacklog, StoreError> {
        let row = sqlx::query_as::<_, BacklogRow>(
            sql!("SELECT count(*) AS jobs,
                    count(*) FILTER (WHERE available_at <= now()) AS due,
                    (extract(epoch FROM now() - min(available_at) FILTER (WHERE available_at <= now()))
                        * 1000)::float8 AS oldest_due_ms
             FROM dispatch_outbox WHERE publishes = 0"),
        )
        .fetch_one(self.pool())
        .await
        .map_err(store_error)?;
        Ok(OutboxBacklog {
            jobs: u64::try_from(row.jobs).unwrap_or(0),
            due: u64::try_from(row.due).unwrap_or(0),
            oldest_due_age: Duration::from_secs_f64(
                row.oldest_due_ms.unwrap_or(0.0).max(0.0) / 1000.0,
            ),
        })
    }

    async fn dispatch_view(&self) -> Result<Vec<crate::domain::ToolDispatch>, StoreError> {
        self.dispatch_rows()
            .await
            .map(crate::domain::dispatch_view::merge)
    }

    async fn lift_pause(&self, tool: &str, key: &str) -> Result<bool, StoreError> {
        self.lift(tool, key).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query(sql!("SELECT 1"))
            .execute(self.pool())
            .await
            .map_err(store_error)?;
        Ok(())
    }

    fn shared_key(&self, label: &str) -> [u8; 32] {
        self.cursors.derive(label)
    }
}
