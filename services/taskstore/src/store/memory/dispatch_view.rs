//! The rows of `domain::dispatch_view` in memory: the same reads as
//! PostgreSQL's, over the store's state.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::state::State;
use crate::domain::DispatchRows;

pub(super) fn rows(state: &mut State, now: DateTime<Utc>) -> DispatchRows {
    // The ready backlog: due jobs not taken by a relay, by the key each
    // waits under.
    let mut waiting: BTreeMap<(String, String), (u64, DateTime<Utc>)> = BTreeMap::new();
    for job in state
        .outbox
        .iter()
        .filter(|job| !job.in_flight && job.available_at <= now)
    {
        let dispatch = state
            .tasks
            .get(&job.key)
            .and_then(|record| record.dispatch.as_ref());
        let key = crate::domain::pause_key(
            dispatch
                .and_then(|d| d.rate.as_ref())
                .map(|rate| rate.key.as_str()),
            dispatch
                .and_then(|d| d.limit.as_ref())
                .map(|limit| limit.key.as_str()),
        );
        let entry = waiting
            .entry((job.tool.clone(), key.to_owned()))
            .or_insert((0, job.available_at));
        entry.0 += 1;
        entry.1 = entry.1.min(job.available_at);
    }
    let mut running: BTreeMap<(String, String), (u32, u32)> = BTreeMap::new();
    for record in state.tasks.values() {
        if let Some(dispatch) = &record.dispatch
            && dispatch.holds_slot(record.task.status, &state.sessions, now)
            && let Some(limit) = &dispatch.limit
        {
            let entry = running
                .entry((dispatch.tool.as_str().to_owned(), limit.key.clone()))
                .or_insert((0, limit.max));
            entry.0 += 1;
            entry.1 = entry.1.min(limit.max);
        }
    }
    let started = state
        .starts
        .iter()
        .map(|((tool, key), starts)| {
            let recent = starts.iter().filter(|at| **at > now).count();
            (tool.clone(), key.clone(), recent)
        })
        .collect::<Vec<_>>();
    DispatchRows {
        waiting: waiting
            .into_iter()
            .map(|((tool, key), (n, oldest))| {
                (tool, key, n, (now - oldest).to_std().unwrap_or_default())
            })
            .collect(),
        running: running
            .into_iter()
            .map(|((tool, key), (n, max))| (tool, key, n, max))
            .collect(),
        started: started
            .into_iter()
            .filter(|(_, _, n)| *n > 0)
            .map(|(tool, key, n)| (tool, key, u32::try_from(n).unwrap_or(u32::MAX)))
            .collect(),
        paused: state
            .pauses
            .iter()
            .filter(|(_, until)| **until > now)
            .map(|((tool, key), until)| (tool.clone(), key.clone(), *until))
            .collect(),
    }
}

/// Lifts the pause of `key` of `tool`; the jobs of the key's tasks due
/// before its end (the ones that backed off) are due now. (Not written
/// through: a pause lives in memory, and a job's due time is only ever
/// brought forward.)
pub(super) fn lift(state: &mut State, tool: &str, key: &str, now: DateTime<Utc>) -> bool {
    let Some(until) = state
        .pauses
        .remove(&(tool.to_owned(), key.to_owned()))
        .filter(|until| *until > now)
    else {
        return false;
    };
    let State { outbox, tasks, .. } = state;
    for job in outbox.iter_mut().filter(|job| {
        job.tool == tool
            && job.publishes == 0
            && job.available_at > now
            && job.available_at <= until
    }) {
        let of_key = tasks
            .get(&job.key)
            .and_then(|record| record.dispatch.as_ref())
            .is_some_and(|dispatch| {
                crate::domain::pause_key(
                    dispatch.rate.as_ref().map(|rate| rate.key.as_str()),
                    dispatch.limit.as_ref().map(|limit| limit.key.as_str()),
                ) == key
            });
        if of_key {
            job.available_at = now;
        }
    }
    true
}
