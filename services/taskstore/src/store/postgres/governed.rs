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
use crate::domain::{
    FAIRNESS_KEY_WINDOW, KeyCounts, KeyLimit, KeyWindow, Priority, TaskRate, WaitingJob,
};
use crate::error::StoreError;
use crate::store::execution::{DueJob, JobPublisher};
use crate::store::statements::sql;

/// Most due rows handled per statement.
const PROMOTE_BATCH: i64 = 1000;
/// Most statements of them per relay pass.
const PROMOTE_BATCHES_PER_PASS: usize = 10;

#[derive(sqlx::FromRow)]
struct Candidate {
    id: i64,
    tenant_id: String,
    task_id: String,
    generation: i64,
    priority: i16,
    stale: bool,
    /// Published before and still unclaimed: it holds its slot and its
    /// start was counted, so neither is asked of it again.
    republish: bool,
    trace_context: Option<String>,
    /// Its key's concurrency limit, and how many of the key run now.
    limit_key: Option<String>,
    limit_max: Option<i32>,
    key_running: i32,
    /// Its key's rate, and how many of the key started within the window.
    rate_key: Option<String>,
    rate_starts: Option<i32>,
    rate_per_ms: Option<i64>,
    key_started: i32,
    /// Its fairness key within its tenant ('' when its tool declares
    /// none); rows come in the order the tenant's keys were read.
    fairness_key: String,
    /// The last key read of its tenant when the read stopped at a window
    /// of keys (`None`: it read them all).
    window_last: Option<String>,
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
            self.gate
                .held_by_keys(&tool, more && chosen.len() < room.min(left));
            jobs.extend(chosen);
        }
        Ok(jobs)
    }

    /// Makes ready the rows that fell due (through the index of rows not
    /// yet ready: what waits for later is never read), deleting those whose
    /// task no longer waits for that job (claimed, ended, dispatched
    /// again). A job taken by a decision whose publish never settled waits
    /// again: it gives back its key's slot. A published job still unclaimed
    /// keeps its slot and goes out again: the broker may have lost it.
    /// Batch after batch while they come full (every published job falls
    /// due once, so at a high rate of tasks there are many), up to a bound
    /// per pass.
    async fn promote_due(&self) -> Result<(), StoreError> {
        let mut republished = 0;
        for _ in 0..PROMOTE_BATCHES_PER_PASS {
            let (handled, again) = self.promote_due_batch().await?;
            republished += again;
            if handled < PROMOTE_BATCH {
                break;
            }
        }
        if republished > 0 {
            tracing::info!(
                jobs = republished,
                "published jobs not claimed in time; publishing them again in case the broker lost them"
            );
        }
        Ok(())
    }

    /// One batch of [`Self::promote_due`]: how many rows it handled, and
    /// how many of them go out again.
    async fn promote_due_batch(&self) -> Result<(i64, i64), StoreError> {
        sqlx::query_as(sql!(concat!(
            "WITH due AS MATERIALIZED (",
            " SELECT o.id, o.tenant_id, o.task_id, o.generation, o.publishes,",
            "  (k.task_id IS NULL OR k.dispatch_generation <> o.generation OR NOT (",
            claimable!("k."),
            ")) AS stale",
            " FROM dispatch_outbox o",
            " LEFT JOIN tasks k ON k.tenant_id = o.tenant_id AND k.task_id = o.task_id",
            " WHERE NOT o.ready AND o.available_at <= now()",
            " ORDER BY o.available_at, o.id LIMIT $1 FOR UPDATE OF o SKIP LOCKED),",
            " gone AS (DELETE FROM dispatch_outbox WHERE id IN (SELECT id FROM due WHERE stale)),",
            " waiting AS (UPDATE dispatch_outbox SET ready = true",
            "  WHERE id IN (SELECT id FROM due WHERE NOT stale)),",
            " freed AS (DELETE FROM dispatch_slots s USING due",
            "  WHERE due.publishes = 0 AND s.tenant_id = due.tenant_id",
            "  AND s.task_id = due.task_id AND s.generation = due.generation)",
            " SELECT count(*), count(*) FILTER (WHERE publishes > 0 AND NOT stale) FROM due"
        )))
        .bind(PROMOTE_BATCH)
        .fetch_one(self.pool())
        .await
        .map_err(store_error)
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
        // Each tenant's first jobs of each of its fairness keys (about
        // `room + 1` in all: one more tells whether more wait), in its own
        // order, passing over the jobs of limit keys at their concurrency
        // limit or rate; the tenants and their keys found by loose scans.
        // The slots that no longer hold and the starts out of their windows
        // are forgotten on the way.
        let (resume_tenants, resume_keys) = self.gate.resumes(tool);
        let candidates = sqlx::query_as::<_, Candidate>(sql!(concat!(
            "WITH RECURSIVE dead AS (",
            " DELETE FROM dispatch_slots s WHERE s.tool = $1 AND NOT EXISTS (",
            "  SELECT 1 FROM tasks t WHERE t.tenant_id = s.tenant_id AND t.task_id = s.task_id",
            "  AND ",
            holds_slot!("t.", "s."),
            ")),",
            " held AS MATERIALIZED (",
            " SELECT s.limit_key, count(*)::int AS running FROM dispatch_slots s",
            " JOIN tasks t ON t.tenant_id = s.tenant_id AND t.task_id = s.task_id",
            " WHERE s.tool = $1 AND ",
            holds_slot!("t.", "s."),
            " GROUP BY s.limit_key),",
            " old AS (DELETE FROM dispatch_starts WHERE tool = $1 AND expires_at <= now()),",
            " over AS (DELETE FROM dispatch_pauses WHERE tool = $1 AND until <= now()),",
            " rated AS MATERIALIZED (",
            " SELECT rate_key, count(*)::int AS started FROM dispatch_starts",
            " WHERE tool = $1 AND expires_at > now() GROUP BY rate_key),",
            // Read once: probing the pauses per candidate row costs tens of
            // milliseconds a decision, even with none.
            " paused AS MATERIALIZED (SELECT pause_key FROM dispatch_pauses",
            "  WHERE tool = $1 AND until > now()),",
            " tenants(tenant_id) AS (",
            " (SELECT tenant_id FROM dispatch_outbox WHERE ready AND tool = $1",
            "  ORDER BY tenant_id LIMIT 1)",
            " UNION ALL",
            " SELECT (SELECT o.tenant_id FROM dispatch_outbox o",
            "         WHERE o.ready AND o.tool = $1 AND o.tenant_id > t.tenant_id",
            "         ORDER BY o.tenant_id LIMIT 1)",
            " FROM tenants t WHERE t.tenant_id IS NOT NULL)",
            " SELECT c.* FROM tenants t",
            " CROSS JOIN LATERAL (SELECT COALESCE((SELECT u.key FROM unnest($3::text[], $4::text[])",
            "  AS u(tenant_id, key) WHERE u.tenant_id = t.tenant_id), '') AS resume) cur",
            // The tenant's fairness keys with ready jobs (a loose scan),
            // from where its last read stopped, round to the start, up to
            // a window of them (`domain::FAIRNESS_KEY_WINDOW`).
            " CROSS JOIN LATERAL (WITH RECURSIVE keys(fairness_key, wrapped, rank) AS (",
            "  (SELECT f.fairness_key, f.wrapped, 1 FROM (",
            "   (SELECT o.fairness_key, false AS wrapped FROM dispatch_outbox o",
            "    WHERE o.ready AND o.tool = $1 AND o.tenant_id = t.tenant_id",
            "    AND o.fairness_key >= cur.resume ORDER BY o.fairness_key LIMIT 1)",
            "   UNION ALL",
            "   (SELECT o.fairness_key, true FROM dispatch_outbox o",
            "    WHERE o.ready AND o.tool = $1 AND o.tenant_id = t.tenant_id",
            "    ORDER BY o.fairness_key LIMIT 1) LIMIT 1) f)",
            "  UNION ALL",
            "  SELECT f.fairness_key, f.wrapped, k.rank + 1 FROM keys k CROSS JOIN LATERAL (",
            "   (SELECT o.fairness_key, k.wrapped AS wrapped FROM dispatch_outbox o",
            "    WHERE o.ready AND o.tool = $1 AND o.tenant_id = t.tenant_id",
            "    AND o.fairness_key > k.fairness_key ORDER BY o.fairness_key LIMIT 1)",
            "   UNION ALL",
            "   (SELECT o.fairness_key, true FROM dispatch_outbox o",
            "    WHERE NOT k.wrapped AND o.ready AND o.tool = $1 AND o.tenant_id = t.tenant_id",
            "    ORDER BY o.fairness_key LIMIT 1) LIMIT 1) f",
            "  WHERE k.rank < $5 AND NOT (f.wrapped AND f.fairness_key >= cur.resume))",
            // Each key's first jobs: enough that the keys together fill
            // the room and one more (which tells whether more wait).
            "  SELECT j.*, g.fairness_key, g.rank AS key_rank,",
            "   (SELECT w.fairness_key FROM keys w WHERE w.rank = $5) AS window_last",
            "  FROM keys g CROSS JOIN LATERAL (",
            "   SELECT o.id, o.tenant_id, o.task_id, o.generation, o.priority, k.trace_context,",
            "    o.publishes > 0 AS republish,",
            "    k.limit_key, k.limit_max, COALESCE(h.running, 0) AS key_running,",
            "    k.rate_key, k.rate_starts, k.rate_per_ms, COALESCE(r.started, 0) AS key_started,",
            "    (k.task_id IS NULL OR k.dispatch_generation <> o.generation OR NOT (",
            claimable!("k."),
            "))",
            "    AS stale",
            "   FROM dispatch_outbox o",
            "   LEFT JOIN tasks k ON k.tenant_id = o.tenant_id AND k.task_id = o.task_id",
            "   LEFT JOIN held h ON h.limit_key = k.limit_key",
            "   LEFT JOIN rated r ON r.rate_key = k.rate_key",
            "   WHERE o.ready AND o.tool = $1 AND o.tenant_id = t.tenant_id",
            "   AND o.fairness_key = g.fairness_key",
            "   AND (o.publishes > 0 OR k.limit_key IS NULL OR COALESCE(h.running, 0) < k.limit_max)",
            "   AND (o.publishes > 0 OR k.rate_key IS NULL OR COALESCE(r.started, 0) < k.rate_starts)",
            // A paused key's jobs wait (`domain::pause_key`, in SQL).
            "   AND NOT EXISTS (SELECT 1 FROM paused p",
            "    WHERE p.pause_key = COALESCE(k.rate_key, k.limit_key, ''))",
            "   ORDER BY o.priority DESC, o.id",
            "   LIMIT ($2 + (SELECT count(*) FROM keys) - 1) / (SELECT count(*) FROM keys)) j) c",
            " WHERE t.tenant_id IS NOT NULL",
            " ORDER BY c.tenant_id, c.key_rank, c.priority DESC, c.id"
        )))
        .bind(tool)
        .bind(i64::try_from(room + 1).unwrap_or(i64::MAX))
        .bind(&resume_tenants)
        .bind(&resume_keys)
        .bind(i32::try_from(FAIRNESS_KEY_WINDOW).unwrap_or(i32::MAX))
        .fetch_all(&mut *tx)
        .await
        .map_err(store_error)?;
        let mut windows: Vec<KeyWindow> = Vec::new();
        for c in &candidates {
            if let Some(last) = &c.window_last
                && windows.last().is_none_or(|w| w.tenant != c.tenant_id)
            {
                windows.push(KeyWindow {
                    tenant: c.tenant_id.clone(),
                    last: last.clone(),
                });
            }
        }
        let (stale, live): (Vec<Candidate>, Vec<Candidate>) =
            candidates.into_iter().partition(|c| c.stale);
        let waiting: Vec<WaitingJob> = live
            .iter()
            .map(|c| WaitingJob {
                id: c.id,
                tenant: c.tenant_id.clone(),
                priority: Priority::of_stored(c.priority),
                fairness: c.fairness_key.clone(),
                limit: c.limit_key.clone().filter(|_| !c.republish).map(|key| {
                    KeyLimit::new(key, c.limit_max.map_or(1, |max| max.max(1).unsigned_abs()))
                }),
                rate: c
                    .rate_key
                    .clone()
                    .filter(|_| !c.republish)
                    .map(|key| TaskRate {
                        key,
                        starts: c.rate_starts.map_or(1, |n| n.max(1).unsigned_abs()),
                        per: std::time::Duration::from_millis(
                            c.rate_per_ms.map_or(0, |ms| ms.max(0).unsigned_abs()),
                        ),
                    }),
            })
            .collect();
        let count = |key: &Option<String>, n: i32| Some((key.clone()?, n.max(0).unsigned_abs()));
        // (Paused keys were passed over in SQL.)
        let mut counts = KeyCounts {
            paused: Default::default(),
            running: live
                .iter()
                .filter_map(|c| count(&c.limit_key, c.key_running))
                .collect(),
            started: live
                .iter()
                .filter_map(|c| count(&c.rate_key, c.key_started))
                .collect(),
        };
        let weight = |tenant: &str| self.config.dispatch_weight(tenant);
        let chosen = self
            .gate
            .choose(tool, &waiting, room, &weight, &mut counts, &windows);
        let chosen_ids: Vec<i64> = chosen.iter().map(|&i| live[i].id).collect();
        let stale_ids: Vec<i64> = stale.iter().map(|c| c.id).collect();
        let slots = Slots::of(chosen.iter().map(|&i| &live[i]));
        // Taken: out of the decision, and not due again before the grace
        // (the publish settles it: deleted once queued, ready again if
        // not); a limited one takes its key's slot. Whether more wait is
        // asked of the rows (the candidates passed over full keys).
        let more: bool = sqlx::query_scalar(sql!(
            "WITH gone AS (DELETE FROM dispatch_outbox WHERE id = ANY($2)),
             taken AS (UPDATE dispatch_outbox SET ready = false,
                 available_at = now() + $3 * interval '1 millisecond'
             WHERE id = ANY($1)),
             started AS (INSERT INTO dispatch_starts (tool, rate_key, expires_at)
                 SELECT $4, r.key, now() + r.per * interval '1 millisecond'
                 FROM unnest($9::text[], $10::bigint[]) AS r(key, per)),
             slots AS (INSERT INTO dispatch_slots (tenant_id, task_id, tool, limit_key, generation)
                 SELECT s.tenant_id, s.task_id, $4, s.limit_key, s.generation
                 FROM unnest($5::text[], $6::text[], $7::text[], $8::bigint[])
                     AS s(tenant_id, task_id, limit_key, generation)
                 ON CONFLICT (tenant_id, task_id) DO UPDATE SET tool = EXCLUDED.tool,
                     limit_key = EXCLUDED.limit_key, generation = EXCLUDED.generation,
                     taken_at = now())
             SELECT EXISTS (SELECT 1 FROM dispatch_outbox WHERE ready AND tool = $4
                            AND id <> ALL($1) AND id <> ALL($2))"
        ))
        .persistent(false) // planned for its arrays: batch_writer.rs, "Plans"
        .bind(&chosen_ids)
        .bind(&stale_ids)
        .bind(millis(HANDOFF_GRACE))
        .bind(tool)
        .bind(&slots.tenants)
        .bind(&slots.tasks)
        .bind(&slots.keys)
        .bind(&slots.generations)
        .bind(&slots.rate_keys)
        .bind(&slots.rate_pers)
        .fetch_one(&mut *tx)
        .await
        .map_err(store_error)?;
        super::commit(tx).await?;
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

/// The slots the chosen limited jobs take and the starts of the rated
/// ones, as the arrays of one statement.
#[derive(Default)]
struct Slots {
    tenants: Vec<String>,
    tasks: Vec<String>,
    keys: Vec<String>,
    generations: Vec<i64>,
    rate_keys: Vec<String>,
    rate_pers: Vec<i64>,
}

impl Slots {
    fn of<'a>(chosen: impl Iterator<Item = &'a Candidate>) -> Self {
        let mut slots = Self::default();
        for c in chosen.filter(|c| !c.republish) {
            if let Some(key) = &c.limit_key {
                slots.tenants.push(c.tenant_id.clone());
                slots.tasks.push(c.task_id.clone());
                slots.keys.push(key.clone());
                slots.generations.push(c.generation);
            }
            if let (Some(key), Some(per)) = (&c.rate_key, c.rate_per_ms) {
                slots.rate_keys.push(key.clone());
                slots.rate_pers.push(per);
            }
        }
        slots
    }
}
