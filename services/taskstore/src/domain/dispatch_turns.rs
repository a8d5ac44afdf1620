//! How far each tenant of a tool, and each fairness key within a tenant,
//! has been served, carried from one dispatch decision to the next (per
//! tool; a replica's own memory: replicas that share a tool alternate their
//! decisions under its lock, so each keeps a fair order of its own).
//!
//! Weighted round-robin by virtual time (stride scheduling): serving a name
//! moves it on by [`STRIDE`] divided by its weight, and the name furthest
//! behind goes next; a name new to the set starts where the set is now,
//! never behind, so one that was idle gets no credit to spend in a burst.

use std::collections::HashMap;

use super::WaitingJob;

/// One turn of a name of weight 1.
const STRIDE: u64 = 1_000_000;

/// The fairness keys of one tenant the store reads per decision: a window
/// of them, starting where the last decision's window left off
/// ([`Turns::resume_at`]), so that a tenant with more keys waiting than
/// this serves them all in turn rather than its first ones forever.
pub const FAIRNESS_KEY_WINDOW: usize = 64;

/// The virtual times of a set of names.
#[derive(Debug, Clone, Default)]
struct Passes {
    passes: HashMap<String, u64>,
    /// Where the set is now: the pass of the name served last.
    floor: u64,
}

impl Passes {
    fn pass(&self, name: &str) -> u64 {
        self.passes.get(name).copied().unwrap_or(0).max(self.floor)
    }

    /// Moves `name` on by one turn of `weight`; remembers at most `most`
    /// names (past it, the half closest to the floor go: each starts there
    /// again, barely ahead of where it was).
    fn served(&mut self, name: &str, weight: u32, most: usize) {
        let start = self.pass(name);
        self.floor = start;
        self.passes
            .insert(name.to_owned(), start + STRIDE / u64::from(weight.max(1)));
        if self.passes.len() > most {
            let mut passes: Vec<u64> = self.passes.values().copied().collect();
            passes.sort_unstable();
            let cutoff = passes[passes.len() - most / 2 - 1];
            self.passes.retain(|_, pass| *pass > cutoff);
        }
    }
}

/// The turns of one tool: its tenants', and within each tenant its fairness
/// keys'.
#[derive(Debug, Clone, Default)]
pub struct Turns {
    tenants: Passes,
    /// Per tenant, its keys' turns (a tenant whose tool declares no
    /// fairness key has one key, "").
    keys: HashMap<String, Passes>,
    /// Per tenant, the key its next window of keys starts at.
    resume: HashMap<String, String>,
}

impl Turns {
    /// Most tenants remembered (a tenant forgotten starts at the floor).
    const MAX_TENANTS: usize = 10_000;
    /// Most keys remembered per tenant.
    const MAX_KEYS: usize = 1_000;

    pub(super) fn tenant_pass(&self, tenant: &str) -> u64 {
        self.tenants.pass(tenant)
    }

    pub(super) fn key_pass(&self, tenant: &str, key: &str) -> u64 {
        self.keys.get(tenant).map_or(0, |keys| keys.pass(key))
    }

    /// One job of `tenant` (of `weight`) and its `key` went out.
    pub(super) fn served(&mut self, tenant: &str, key: &str, weight: u32) {
        self.tenants.served(tenant, weight, Self::MAX_TENANTS);
        if self.keys.len() >= Self::MAX_TENANTS && !self.keys.contains_key(tenant) {
            // Rare: as many tenants with keys as are remembered. They all
            // start their keys' turns again.
            self.keys.clear();
            self.resume.clear();
        }
        self.keys
            .entry(tenant.to_owned())
            .or_default()
            .served(key, 1, Self::MAX_KEYS);
    }

    /// Where the store's read of `tenant`'s keys starts ("" : the first).
    pub fn resume_at(&self, tenant: &str) -> &str {
        self.resume.get(tenant).map_or("", String::as_str)
    }

    /// Every tenant's [`Self::resume_at`] that is not the first key, as two
    /// columns (tenants, keys) for the store's read.
    pub fn resumes(&self) -> (Vec<String>, Vec<String>) {
        self.resume
            .iter()
            .map(|(tenant, key)| (tenant.clone(), key.clone()))
            .unzip()
    }

    /// After a decision over `waiting` (each tenant's keys in the order
    /// the store read them) chose `chosen`: a tenant whose read stopped at
    /// [`FAIRNESS_KEY_WINDOW`] keys (`windows`: the tenant and the last key
    /// read) starts its next read at its first key with a job that was not
    /// served, else at the last key it read; every other tenant at its first
    /// key. So every key comes into a window in turn, and keys whose jobs
    /// cannot go (at their limit, paused) do not hold the window still.
    pub fn after_windows(
        &mut self,
        waiting: &[WaitingJob],
        chosen: &[usize],
        windows: &[KeyWindow],
    ) {
        self.resume
            .retain(|tenant, _| windows.iter().any(|window| &window.tenant == tenant));
        for window in windows {
            let served = |key: &str| {
                chosen
                    .iter()
                    .any(|&i| waiting[i].tenant == window.tenant && waiting[i].fairness == key)
            };
            let next = waiting
                .iter()
                .filter(|job| job.tenant == window.tenant)
                .map(|job| job.fairness.as_str())
                .find(|key| !served(key))
                .unwrap_or(&window.last);
            if self.resume.len() >= Self::MAX_TENANTS && !self.resume.contains_key(&window.tenant) {
                self.resume.clear();
            }
            self.resume.insert(window.tenant.clone(), next.to_owned());
        }
    }
}

/// One tenant whose keys the store read only in part: it stopped at
/// [`FAIRNESS_KEY_WINDOW`] keys, the last of them `last`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyWindow {
    pub tenant: String,
    pub last: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turns_remember_a_bounded_number_of_tenants_and_keys() {
        let mut turns = Turns::default();
        for n in 0..(Turns::MAX_TENANTS + 10) {
            turns.served(&format!("t{n}"), "", 1);
        }
        assert!(turns.tenants.passes.len() <= Turns::MAX_TENANTS);
        assert!(turns.keys.len() <= Turns::MAX_TENANTS);
        assert_eq!(
            turns.tenant_pass("t0"),
            turns.tenants.floor,
            "forgotten: at the floor"
        );
        for n in 0..(Turns::MAX_KEYS + 10) {
            turns.served("busy", &format!("k{n}"), 1);
        }
        assert!(turns.keys["busy"].passes.len() <= Turns::MAX_KEYS);
    }

    fn keyed(id: i64, tenant: &str, key: &str) -> WaitingJob {
        WaitingJob {
            id,
            tenant: tenant.into(),
            priority: Default::default(),
            fairness: key.into(),
            limit: None,
            rate: None,
        }
    }

    #[test]
    fn a_partial_read_resumes_at_its_first_key_not_served() {
        // The store read keys k3, k4, k5 of tenant a (from its resume
        // point), stopping there; k4 went out.
        let waiting = [
            keyed(1, "a", "k3"),
            keyed(2, "a", "k4"),
            keyed(3, "a", "k5"),
        ];
        let window = |tenant: &str, last: &str| KeyWindow {
            tenant: tenant.into(),
            last: last.into(),
        };
        let mut turns = Turns::default();
        turns.after_windows(&waiting, &[1], &[window("a", "k5")]);
        assert_eq!(
            turns.resume_at("a"),
            "k3",
            "k3 was passed over: it comes first"
        );
        turns.after_windows(&waiting, &[0, 1, 2], &[window("a", "k6")]);
        assert_eq!(
            turns.resume_at("a"),
            "k6",
            "all served: on past the keys read (k6 had no job that could go)"
        );
        assert_eq!(
            turns.resumes(),
            (vec!["a".to_owned()], vec!["k6".to_owned()])
        );
        // A read that held every key the tenant has: from the first again.
        turns.after_windows(&waiting, &[0], &[]);
        assert_eq!(turns.resume_at("a"), "");
        assert_eq!(turns.resumes(), (vec![], vec![]));
    }
}
