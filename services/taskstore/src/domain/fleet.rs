//! The worker fleet as the service sees it: workers report themselves and
//! the tools they serve every few seconds, and "what is served now" is
//! derived from the reports that are recent enough.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::caller::Reach;
use super::execution::ToolName;
use super::ids::{InvalidId, TenantId};
use super::tools::ToolDescription;

/// How often workers report, and how long a report counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetPolicy {
    /// The interval the service asks workers to report at.
    pub heartbeat_interval: Duration,
    /// A worker whose last report is older than this is no longer counted:
    /// three missed reports, so one slow report does not hide a worker.
    pub seen_within: Duration,
}

impl Default for FleetPolicy {
    fn default() -> Self {
        Self {
            heartbeat_interval: Duration::from_secs(10),
            seen_within: Duration::from_secs(30),
        }
    }
}

/// A worker's name: 1 to 256 bytes of UTF-8 without control characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkerId(String);

impl WorkerId {
    pub const MAX_BYTES: usize = 256;

    pub fn parse(raw: &str) -> Result<Self, InvalidId> {
        if raw.is_empty() || raw.len() > Self::MAX_BYTES {
            return Err(InvalidId("must be 1 to 256 bytes"));
        }
        if raw.chars().any(char::is_control) {
            return Err(InvalidId("must not contain control characters"));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// What a worker reports about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerHeartbeat {
    pub worker_id: WorkerId,
    /// Who announced it: the tenants its credentials reach. The registry
    /// files a worker under its id *and* this, so that credentials of one
    /// reach can neither overwrite nor forget a worker of another, and a
    /// worker bound to one tenant is seen by that tenant only.
    pub reach: Reach,
    /// Sorted, without repeats.
    pub tools: Vec<ToolName>,
    /// Attempts it runs at once, and how many run now.
    pub slots: u32,
    pub busy: u32,
    /// What its tools are, for those it described (at most one per tool,
    /// each one of `tools`), by name.
    pub descriptions: Vec<ToolDescription>,
    /// Whether it consumes its tools' queues now: a worker that cannot
    /// reach the job queue serves nothing (older workers do not say, and
    /// count as consuming).
    pub consuming: bool,
}

impl WorkerHeartbeat {
    /// The most tools one worker may report (a bound on the row it writes).
    pub const MAX_TOOLS: usize = 1000;

    pub fn new(worker_id: WorkerId, tools: Vec<ToolName>, slots: u32, busy: u32) -> Self {
        let mut tools = tools;
        tools.sort();
        tools.dedup();
        Self {
            worker_id,
            reach: Reach::AllTenants,
            tools,
            slots,
            busy: busy.min(slots),
            descriptions: Vec::new(),
            consuming: true,
        }
    }

    /// Consuming its queues now, or not.
    pub fn consuming(mut self, consuming: bool) -> Self {
        self.consuming = consuming;
        self
    }

    /// Announced by credentials of `reach` (every tenant by default).
    pub fn announced_by(mut self, reach: Reach) -> Self {
        self.reach = reach;
        self
    }

    /// Whether `tenant` sees this worker and its tools: a fleet's worker
    /// serves every tenant, a tenant-bound one its own.
    pub fn serves(&self, tenant: &TenantId) -> bool {
        match &self.reach {
            Reach::AllTenants => true,
            Reach::Tenant(own) => own == tenant,
        }
    }

    /// With the descriptions of its tools: those of tools it does not
    /// serve are dropped, and the first of repeated ones kept.
    pub fn with_descriptions(mut self, descriptions: Vec<ToolDescription>) -> Self {
        let mut kept: Vec<ToolDescription> = descriptions
            .into_iter()
            .filter(|d| self.tools.binary_search(&d.name).is_ok())
            .collect();
        kept.sort_by(|a, b| a.name.cmp(&b.name));
        kept.dedup_by(|later, first| later.name == first.name);
        self.descriptions = kept;
        self
    }

    /// The description this worker gave `tool`, if any.
    pub fn description_of(&self, tool: &ToolName) -> Option<&ToolDescription> {
        self.descriptions
            .binary_search_by(|d| d.name.cmp(tool))
            .ok()
            .map(|at| &self.descriptions[at])
    }
}

/// A worker as the registry knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    pub heartbeat: WorkerHeartbeat,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
}

/// A tool and the workers that serve it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedTool {
    pub name: ToolName,
    pub workers: u32,
    pub slots: u32,
    pub busy: u32,
    pub last_seen_at: DateTime<Utc>,
    /// What the tool is, as the latest worker that described it says (an
    /// undescribed tool takes any arguments, task optional).
    pub description: ToolDescription,
    /// Its workers that consume its queue now (none: its tasks wait).
    pub consuming: u32,
    /// How many different descriptions its workers give it (more than one:
    /// they disagree, and calls may fail on some of them).
    pub descriptions: u32,
}

/// The workers `tenant` sees: the fleet's and its own.
pub fn workers_of(tenant: &TenantId, workers: &[WorkerInfo]) -> Vec<WorkerInfo> {
    workers
        .iter()
        .filter(|worker| worker.heartbeat.serves(tenant))
        .cloned()
        .collect()
}

/// The tools served to `tenant`: those of the workers it sees.
pub fn served_tools_of(tenant: &TenantId, workers: &[WorkerInfo]) -> Vec<ServedTool> {
    served_tools(&workers_of(tenant, workers))
}

/// The tools `workers` serve, by name.
pub fn served_tools(workers: &[WorkerInfo]) -> Vec<ServedTool> {
    let mut tools: BTreeMap<&ToolName, ServedTool> = BTreeMap::new();
    // Whose description of each tool is listed: a fleet worker's (serving
    // every tenant, run by the operator) before a tenant-bound one's, so
    // that a tenant's own worker never redescribes a shared tool even to
    // its own tenant; then the worker that started last (then the greatest
    // id), so that while workers of two versions report during a rollout,
    // the new version's description is listed steadily rather than
    // whichever reported last.
    let mut described_by: BTreeMap<&ToolName, (bool, DateTime<Utc>, &WorkerId)> = BTreeMap::new();
    // The different descriptions of each tool (an undescribed report counts
    // as one more way to describe it).
    let mut distinct: BTreeMap<&ToolName, Vec<Option<&ToolDescription>>> = BTreeMap::new();
    for worker in workers {
        let report = &worker.heartbeat;
        for name in &report.tools {
            let tool = tools.entry(name).or_insert_with(|| ServedTool {
                name: name.clone(),
                workers: 0,
                slots: 0,
                busy: 0,
                last_seen_at: worker.last_seen_at,
                description: ToolDescription::undescribed(name.clone()),
                consuming: 0,
                descriptions: 0,
            });
            tool.workers += 1;
            tool.consuming += u32::from(report.consuming);
            let given = report.description_of(name);
            let seen = distinct.entry(name).or_default();
            if !seen.contains(&given) {
                seen.push(given);
            }
            tool.descriptions = u32::try_from(seen.len()).unwrap_or(u32::MAX);
            tool.slots = tool.slots.saturating_add(report.slots);
            tool.busy = tool.busy.saturating_add(report.busy);
            tool.last_seen_at = tool.last_seen_at.max(worker.last_seen_at);
            let fleet = report.reach == Reach::AllTenants;
            let newer = (fleet, worker.first_seen_at, &report.worker_id);
            if let Some(description) = report.description_of(name)
                && described_by.get(name).is_none_or(|known| *known < newer)
            {
                described_by.insert(name, newer);
                tool.description = description.clone();
            }
        }
    }
    tools.into_values().collect()
}

/// The tools `workers` describe differently, and how each worker describes
/// each of them (a few words and a fingerprint of the whole), for the
/// operator to see which worker serves which.
pub fn differing_descriptions(
    workers: &[WorkerInfo],
) -> BTreeMap<WorkerId, BTreeMap<ToolName, String>> {
    let differing: Vec<ToolName> = served_tools(workers)
        .into_iter()
        .filter(|tool| tool.descriptions > 1)
        .map(|tool| tool.name)
        .collect();
    let mut by_worker = BTreeMap::new();
    for worker in workers {
        let report = &worker.heartbeat;
        let mine: BTreeMap<ToolName, String> = differing
            .iter()
            .filter(|name| report.tools.binary_search(name).is_ok())
            .map(|name| {
                let said = report
                    .description_of(name)
                    .map_or_else(|| "undescribed".to_owned(), ToolDescription::summary);
                (name.clone(), said)
            })
            .collect();
        if !mine.is_empty() {
            by_worker.insert(report.worker_id.clone(), mine);
        }
    }
    by_worker
}

/// Jobs in the outbox: committed, not yet in the queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxBacklog {
    /// Every job, including those held back (retry backoff, no worker).
    pub jobs: u64,
    /// Jobs due now.
    pub due: u64,
    /// How long the oldest due job has been due.
    pub oldest_due_age: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> ToolName {
        ToolName::parse(name).expect("tool name")
    }

    fn worker(id: &str, tools: &[&str], slots: u32, busy: u32, seen_us: i64) -> WorkerInfo {
        let at = DateTime::from_timestamp_micros(seen_us).expect("time");
        WorkerInfo {
            heartbeat: WorkerHeartbeat::new(
                WorkerId::parse(id).expect("id"),
                tools.iter().map(|t| tool(t)).collect(),
                slots,
                busy,
            ),
            first_seen_at: at,
            last_seen_at: at,
        }
    }

    #[test]
    fn tools_add_up_their_workers() {
        let served = served_tools(&[
            worker("a", &["echo", "sleep"], 4, 1, 10),
            worker("b", &["echo"], 2, 2, 20),
        ]);
        assert_eq!(
            served,
            [
                ServedTool {
                    name: tool("echo"),
                    workers: 2,
                    slots: 6,
                    busy: 3,
                    last_seen_at: DateTime::from_timestamp_micros(20).expect("time"),
                    description: ToolDescription::undescribed(tool("echo")),
                    consuming: 2,
                    descriptions: 1,
                },
                ServedTool {
                    name: tool("sleep"),
                    workers: 1,
                    slots: 4,
                    busy: 1,
                    last_seen_at: DateTime::from_timestamp_micros(10).expect("time"),
                    description: ToolDescription::undescribed(tool("sleep")),
                    consuming: 1,
                    descriptions: 1,
                },
            ]
        );
        assert!(served_tools(&[]).is_empty());
    }

    fn described(name: &str, text: &str) -> ToolDescription {
        ToolDescription::parse(
            tool(name),
            "",
            text,
            "",
            crate::domain::TaskSupport::Required,
        )
        .expect("description")
    }

    #[test]
    fn the_newest_workers_description_of_a_tool_wins() {
        let mut old = worker("old", &["echo"], 1, 0, 10);
        old.heartbeat = old
            .heartbeat
            .with_descriptions(vec![described("echo", "v1")]);
        let mut new = worker("new", &["echo", "sleep"], 1, 0, 20);
        new.heartbeat = new.heartbeat.with_descriptions(vec![
            described("echo", "v2"),
            described("echo", "repeated: dropped"),
            described("hash", "not served: dropped"),
        ]);
        assert_eq!(new.heartbeat.descriptions.len(), 1);
        let bare = worker("bare", &["echo"], 1, 0, 30);
        // The old worker reported last: its description still loses to the
        // one of the worker that started after it.
        old.last_seen_at = DateTime::from_timestamp_micros(99).expect("time");
        for order in [[&old, &new, &bare], [&bare, &new, &old]] {
            let served = served_tools(&order.map(Clone::clone));
            assert_eq!(served[0].description.description.as_deref(), Some("v2"));
            assert_eq!(
                served[1].description,
                ToolDescription::undescribed(tool("sleep"))
            );
        }
    }

    fn bound_to(tenant: &str, mut info: WorkerInfo) -> WorkerInfo {
        let tenant = TenantId::parse(tenant).expect("tenant");
        info.heartbeat = info.heartbeat.announced_by(Reach::Tenant(tenant));
        info
    }

    #[test]
    fn a_tenant_sees_the_fleet_and_its_own_workers_only() {
        let acme = TenantId::parse("acme").expect("tenant");
        let globex = TenantId::parse("globex").expect("tenant");
        let workers = [
            worker("fleet", &["echo"], 4, 0, 10),
            bound_to("acme", worker("acme-1", &["echo", "private"], 2, 0, 20)),
            bound_to("globex", worker("globex-1", &["secret"], 1, 0, 30)),
        ];
        let names = |tools: Vec<ServedTool>| -> Vec<(String, u32)> {
            tools
                .into_iter()
                .map(|t| (t.name.to_string(), t.workers))
                .collect()
        };
        assert_eq!(
            names(served_tools_of(&acme, &workers)),
            [("echo".to_owned(), 2), ("private".to_owned(), 1)]
        );
        assert_eq!(
            names(served_tools_of(&globex, &workers)),
            [("echo".to_owned(), 1), ("secret".to_owned(), 1)]
        );
        assert_eq!(workers_of(&globex, &workers).len(), 2);
    }

    #[test]
    fn a_fleet_workers_description_wins_over_a_tenant_bound_one() {
        let acme = TenantId::parse("acme").expect("tenant");
        let mut fleet = worker("fleet", &["echo"], 1, 0, 10);
        fleet.heartbeat = fleet
            .heartbeat
            .with_descriptions(vec![described("echo", "the operator's")]);
        // Started later, yet a tenant's own worker does not redescribe it.
        let mut own = bound_to("acme", worker("acme-1", &["echo"], 1, 0, 20));
        own.heartbeat = own
            .heartbeat
            .with_descriptions(vec![described("echo", "the tenant's")]);
        let served = served_tools_of(&acme, &[own.clone(), fleet]);
        assert_eq!(
            served[0].description.description.as_deref(),
            Some("the operator's")
        );
        // Alone, the tenant's own description is its tenant's.
        let served = served_tools_of(&acme, &[own]);
        assert_eq!(
            served[0].description.description.as_deref(),
            Some("the tenant's")
        );
    }

    #[test]
    fn workers_that_consume_and_that_describe_alike_are_counted() {
        let mut first = worker("a", &["echo"], 1, 0, 10);
        first.heartbeat = first
            .heartbeat
            .with_descriptions(vec![described("echo", "counts to n")]);
        let mut second = worker("b", &["echo"], 1, 0, 20);
        second.heartbeat = second
            .heartbeat
            .clone()
            .with_descriptions(vec![described("echo", "counts to n")])
            .consuming(false);
        let served = served_tools(&[first.clone(), second.clone()]);
        assert_eq!((served[0].consuming, served[0].descriptions), (1, 1));
        assert!(differing_descriptions(&[first.clone(), second.clone()]).is_empty());
        second.heartbeat = second
            .heartbeat
            .with_descriptions(vec![described("echo", "counts from n")]);
        let served = served_tools(&[first.clone(), second.clone()]);
        assert_eq!(served[0].descriptions, 2);
        let who = differing_descriptions(&[first, second]);
        assert_eq!(who.len(), 2, "{who:?}");
        let said = &who[&WorkerId::parse("b").expect("id")][&tool("echo")];
        assert!(said.starts_with("counts from n (schema "), "{said}");
    }

    #[test]
    fn reports_are_normalized() {
        let report = WorkerHeartbeat::new(
            WorkerId::parse("w").expect("id"),
            vec![tool("b"), tool("a"), tool("b")],
            2,
            9,
        );
        assert_eq!(report.tools, [tool("a"), tool("b")]);
        assert_eq!(report.busy, 2, "busy never exceeds slots");
        assert!(WorkerId::parse("").is_err());
        assert!(WorkerId::parse("a\nb").is_err());
        assert!(WorkerId::parse(&"x".repeat(257)).is_err());
    }
}
