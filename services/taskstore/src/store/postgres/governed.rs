//! Governed dispatch on PostgreSQL: the backlog of a tool whose queue is
//! full waits in the outbox, and what goes next is decided when there is
//! room (`domain::next_jobs`: priority, tenants taking turns, oldest
//! first), by one replica at a time per tool (an advisory lock), reading
//! only the rows that may go now (migration 0019's `ready` index).
//!
//! A row is written not ready. It becomes ready when it falls due (a retry's
//! backoff or a later start has passed, or a fresh job's grace ran out
//! because its replica could not publish it: [`promote_due`]), or at once
//! when its replica finds the tool's queue full ([`make_ready`]).

use std::time::Instant;

use super::PgTaskStore;
use super::advisory::try_lock_until_commit;
use super::error::store_error;
use super::handoff::{FreshJob, HANDOFF_GRACE};
use super::rows::millis;
use crate::domain::{Priority, WaitingJob};
use crate::error::StoreError;
use crate::store::execution::{DueJob, JobPublisher};
use crate::store::statements::sql;

/// Most rows made ready per pass.
const PROMOTE_BATCH: i64 = 1000;

#[derive(sqlx::FromRow)]
struct Candidate {
    id: i64,
    tenant_id: String,
    task_id: String,
    generation: i64,
    priority: i16,
    stale: bool,
    trace_context: Option<String>,
}

impl PgTaskStore {
    /// The jobs of tools with a backlog, as much as their queues have room
    /// for (`taken` are this pass's jobs already going out).
    pub(super) async fn take_governed(
        &self,
        limit: u32,
        queue: &dyn JobPublisher,
        taken: &[DueJob],
    ) -> Result<Vec<DueJob>, StoreError> {
        self.promote_due().await?;
        let tools = self.tools_with_ready_jobs().await?;
        self.gate.only_waiting(&tools);
        let mut jobs = Vec::new();
        for tool in tools {
            let left = (limit as usize).saturating_sub(taken.len() + jobs.len());
            if left == 0 {
                break;
            }
            let going = taken.iter().filter(|job| job.message.tool == tool).count();
            // Ready rows are a backlog by definition (new jobs that found
            // room went straight out): the queue's room, strictly.
            let room = match queue.depth(&tool).await {
                Some(depth) => (depth.room() as usize).saturating_sub(going),
                None => left,
            };
            if room == 0 {
                self.gate.decided(&tool, true);
                continue;
            }
            let (chosen, more) = self.decide(&tool, room.min(left)).await?;
            self.gate.decided(&tool, more);
            jobs.extend(chosen);
        }
        Ok(jobs)
    }

    /// Makes ready the rows that fell due (through the index of rows not
    /// yet ready: what waits for later is never read).
    async fn promote_due(&self) -> Result<(), StoreError> {
        sqlx::query(sql!(
            "UPDATE dispatch_outbox SET ready = true
             WHERE id IN (SELECT id FROM dispatch_outbox
                          WHERE NOT ready AND available_at <= now()
                          ORDER BY available_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)"
        ))
        .bind(PROMOTE_BATCH)
        .execute(self.pool())
        .await
        .map_err(store_error)?;
        Ok(())
    }

    /// The tools with ready rows: one index probe per tool (a loose scan).
    async fn tools_with_ready_jobs(&self) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(sql!(
            "WITH RECURSIVE tools(tool) AS (
                 (SELECT tool FROM dispatch_outbox WHERE ready ORDER BY tool LIMIT 1)
                 UNION ALL
                 SELECT (SELECT o.tool FROM dispatch_outbox o
                         WHERE o.ready AND o.tool > t.tool ORDER BY o.tool LIMIT 1)
                 FROM tools t WHERE t.tool IS NOT NULL)
             SELECT tool FROM tools WHERE tool IS NOT NULL"
        ))
        .fetch_all(self.pool())
        .await
        .map_err(store_error)
    }

    /// Leaves this replica's fresh jobs to the decision: their rows are
    /// ready now.
    pub(super) async fn make_ready(&self, outbox_ids: &[i64]) -> Result<(), StoreError> {
        sqlx::query(sql!(
            "UPDATE dispatch_outbox SET ready = true, available_at = now() WHERE id = ANY($1)"
        ))
        .persistent(false) // planned for its array: batch_writer.rs, "Plans"
        .bind(outbox_ids)
        .execute(self.pool())
        .await
        .map_err(store_error)?;
        Ok(())
    }

    /// Decides which of `tool`'s ready jobs go now (at most `room`), under
    /// the tool's lock; a replica that finds it held leaves the decision to
    /// the one holding it. Returns the jobs taken and whether more wait.
    async fn decide(&self, tool: &str, room: usize) -> Result<(Vec<DueJob>, bool), StoreError> {
        let mut tx = self.begin().await?;
        if !try_lock_until_commit(&mut tx, format!("taskstore/dispatch/{tool}")).await? {
            return Ok((Vec::new(), true));
        }
        // Each tenant's first `room + 1` (one more tells whether more wait),
        // in its own order; the tenants found by a loose scan.
        let candidates = sqlx::query_as::<_, Candidate>(sql!(concat!(
            "WITH RECURSIVE tenants(tenant_id) AS (",
            " (SELECT tenant_id FROM dispatch_outbox WHERE ready AND tool = $1",
            "  ORDER BY tenant_id LIMIT 1)",
            " UNION ALL",
            " SELECT (SELECT o.tenant_id FROM dispatch_outbox o",
            "         WHERE o.ready AND o.tool = $1 AND o.tenant_id > t.tenant_id",
            "         ORDER BY o.tenant_id LIMIT 1)",
            " FROM tenants t WHERE t.tenant_id IS NOT NULL)",
            " SELECT c.* FROM tenants t CROSS JOIN LATERAL (",
            "  SELECT o.id, o.tenant_id, o.task_id, o.generation, o.priority, k.trace_context,",
            "   (k.task_id IS NULL OR k.dispatch_generation <> o.generation OR NOT (",
            claimable!("k."),
            "))",
            "   AS stale",
            "  FROM dispatch_outbox o",
            "  LEFT JOIN tasks k ON k.tenant_id = o.tenant_id AND k.task_id = o.task_id",
            "  WHERE o.ready AND o.tool = $1 AND o.tenant_id = t.tenant_id",
            "  ORDER BY o.priority DESC, o.id LIMIT $2) c",
            " WHERE t.tenant_id IS NOT NULL"
        )))
        .bind(tool)
        .bind(i64::try_from(room + 1).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await
        .map_err(store_error)?;
        let (stale, live): (Vec<Candidate>, Vec<Candidate>) =
            candidates.into_iter().partition(|c| c.stale);
        let waiting: Vec<WaitingJob> = live
            .iter()
            .map(|c| WaitingJob {
                id: c.id,
                tenant: c.tenant_id.clone(),
                priority: Priority::of_stored(c.priority),
            })
            .collect();
        let weight = |tenant: &str| self.config.dispatch_weight(tenant);
        let chosen = self.gate.choose(tool, &waiting, room, &weight);
        let chosen_ids: Vec<i64> = chosen.iter().map(|&i| live[i].id).collect();
        let stale_ids: Vec<i64> = stale.iter().map(|c| c.id).collect();
        // Taken: out of the decision, and not due again before the grace
        // (the publish settles it: deleted once queued, ready again if not).
        sqlx::query(sql!(
            "WITH gone AS (DELETE FROM dispatch_outbox WHERE id = ANY($2))
             UPDATE dispatch_outbox SET ready = false,
                 available_at = now() + $3 * interval '1 millisecond'
             WHERE id = ANY($1)"
        ))
        .persistent(false) // planned for its arrays: batch_writer.rs, "Plans"
        .bind(&chosen_ids)
        .bind(&stale_ids)
        .bind(millis(HANDOFF_GRACE))
        .execute(&mut *tx)
        .await
        .map_err(store_error)?;
        super::commit(tx).await?;
        let more = live.len() > chosen.len();
        let now = Instant::now();
        let mut live: Vec<Option<Candidate>> = live.into_iter().map(Some).collect();
        let jobs = chosen
            .into_iter()
            .filter_map(|i| live.get_mut(i).and_then(Option::take))
            .map(|c| {
                FreshJob::of_row(
                    c.id,
                    c.tenant_id,
                    c.task_id,
                    c.generation,
                    tool.to_owned(),
                    c.trace_context,
                    now,
                )
                .into_due()
            })
            .collect();
        Ok((jobs, more))
    }
}
