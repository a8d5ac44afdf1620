//! What governed dispatch holds back now, for operators (`taskstore
//! status`, GetStatus, Prometheus): per tool, the jobs waiting for room and
//! the oldest wait; per key, its running tasks against its limit, its
//! starts within its window, and a pause. Every backend reads its own
//! tables and hands the rows to [`merge`], so they all answer alike.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// One tool's dispatch, as an operator sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolDispatch {
    pub tool: String,
    /// Jobs due and waiting for room (a full queue, a full key, a rate, a
    /// pause).
    pub waiting: u64,
    /// How long the oldest of them has waited.
    pub oldest_wait: Duration,
    /// The keys with anything to say, by key.
    pub keys: Vec<KeyDispatch>,
}

/// One key of a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyDispatch {
    pub key: String,
    /// Its jobs due and waiting for room.
    pub waiting: u64,
    /// Tasks holding a slot of the key now, and its limit.
    pub running: u32,
    pub max_running: Option<u32>,
    /// Jobs of the key sent within its rate's window.
    pub started: u32,
    /// Until when the key is paused (a back-off).
    pub paused_until: Option<DateTime<Utc>>,
}

impl KeyDispatch {
    /// Whether its jobs wait for a slot now.
    pub fn full(&self) -> bool {
        self.max_running.is_some_and(|max| self.running >= max)
    }
}

/// The rows a backend read, each kind by tool.
#[derive(Debug, Clone, Default)]
pub struct DispatchRows {
    /// (tool, key, waiting, oldest wait): the key a job waits under (its
    /// rate key, else its limit key, else "": `domain::pause_key`).
    pub waiting: Vec<(String, String, u64, Duration)>,
    /// (tool, key, running, limit)
    pub running: Vec<(String, String, u32, u32)>,
    /// (tool, key, started within the window)
    pub started: Vec<(String, String, u32)>,
    /// (tool, key, until)
    pub paused: Vec<(String, String, DateTime<Utc>)>,
}

type Keys = BTreeMap<String, KeyDispatch>;

/// The rows, by tool then key (both in order).
pub fn merge(rows: DispatchRows) -> Vec<ToolDispatch> {
    let mut tools: BTreeMap<String, (ToolDispatch, Keys)> = BTreeMap::new();
    fn tool<'a>(
        tools: &'a mut BTreeMap<String, (ToolDispatch, Keys)>,
        name: &str,
    ) -> &'a mut (ToolDispatch, Keys) {
        tools.entry(name.to_owned()).or_insert_with(|| {
            let entry = ToolDispatch {
                tool: name.to_owned(),
                ..ToolDispatch::default()
            };
            (entry, Keys::new())
        })
    }
    fn key<'a>(
        tools: &'a mut BTreeMap<String, (ToolDispatch, Keys)>,
        name: &str,
        key: String,
    ) -> &'a mut KeyDispatch {
        tool(tools, name)
            .1
            .entry(key.clone())
            .or_insert_with(|| KeyDispatch {
                key,
                ..KeyDispatch::default()
            })
    }
    for (name, k, running, max) in rows.running {
        let entry = key(&mut tools, &name, k);
        entry.running = running;
        entry.max_running = Some(max);
    }
    for (name, k, started) in rows.started {
        key(&mut tools, &name, k).started = started;
    }
    for (name, k, until) in rows.paused {
        key(&mut tools, &name, k).paused_until = Some(until);
    }
    for (name, k, waiting, oldest) in rows.waiting {
        let (entry, keys) = tool(&mut tools, &name);
        entry.waiting += waiting;
        entry.oldest_wait = entry.oldest_wait.max(oldest);
        // The jobs of no key are the tool's; "" is listed only when it has
        // something else to say (a pause of the whole tool).
        if !k.is_empty() || keys.contains_key(&k) {
            key(&mut tools, &name, k).waiting = waiting;
        }
    }
    tools
        .into_values()
        .map(|(mut entry, keys)| {
            entry.keys = keys.into_values().collect();
            entry
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_tools_and_their_keys_in_order() {
        let until = DateTime::from_timestamp(2_000_000_000, 0).expect("time");
        let merged = merge(DispatchRows {
            waiting: vec![
                ("fetch".into(), String::new(), 4, Duration::from_secs(3)),
                (
                    "fetch".into(),
                    "tenant=\"b\"".into(),
                    3,
                    Duration::from_secs(1),
                ),
                ("mail".into(), String::new(), 2, Duration::from_secs(9)),
            ],
            running: vec![
                ("fetch".into(), "tenant=\"b\"".into(), 3, 3),
                ("fetch".into(), "tenant=\"a\"".into(), 1, 3),
            ],
            started: vec![("fetch".into(), "tenant=\"a\"".into(), 12)],
            paused: vec![("mail".into(), String::new(), until)],
        });
        assert_eq!(merged.len(), 2);
        let fetch = &merged[0];
        assert_eq!((fetch.tool.as_str(), fetch.waiting), ("fetch", 7));
        assert_eq!(
            fetch.oldest_wait,
            Duration::from_secs(3),
            "the oldest of any key"
        );
        let keys: Vec<(&str, u64, u32, u32, bool)> = fetch
            .keys
            .iter()
            .map(|k| (k.key.as_str(), k.waiting, k.running, k.started, k.full()))
            .collect();
        assert_eq!(
            keys,
            [
                ("tenant=\"a\"", 0, 1, 12, false),
                ("tenant=\"b\"", 3, 3, 0, true)
            ],
            "the jobs of no key are the tool's alone"
        );
        assert_eq!(merged[1].waiting, 2);
        assert_eq!(merged[1].keys[0].paused_until, Some(until));
        assert_eq!(
            merged[1].keys[0].waiting, 2,
            "the paused whole tool's waiting"
        );
    }
}
