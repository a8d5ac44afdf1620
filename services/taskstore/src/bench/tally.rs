//! Whether the streams were told everything, and nothing they should not
//! have been: every change of the measured phase reached each stream that
//! follows its task (status, and progress on session streams) exactly in
//! order; nothing reached a stream that does not follow it; after the
//! replica stopped, each stream came back and showed every task's latest
//! state (the changes made while it was away may be folded into that
//! state: a resync shows the task as it is, not each step).

use serde::Serialize;

use super::listeners::{Heard, Kind};

/// How far every task's changes went at the phase boundaries.
#[derive(Debug, Clone)]
pub(crate) struct Marks {
    /// Acknowledged changes before the streams opened.
    pub before: Vec<u64>,
    /// … at the end of the measured phase.
    pub measured: Vec<u64>,
    /// … at the end of the run (after the hand-over, if any).
    pub last: Vec<u64>,
}

/// The checks of one kind of stream.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Checks {
    pub streams: u64,
    /// Streams that stopped before the end of the run (failures).
    pub failed: u64,
    /// Notifications of tasks the stream does not follow: must be 0.
    pub foreign: u64,
    /// Changes of the measured phase a stream following the task never
    /// showed: must be 0.
    pub missing: u64,
    /// Progress notifications missing likewise (session streams).
    pub missing_progress: u64,
    /// Changes shown twice.
    pub duplicates: u64,
    /// A change shown after a later one of the same task.
    pub out_of_order: u64,
    /// Tasks whose latest change the stream never showed: must be 0.
    pub latest_not_shown: u64,
    /// Changes made during the hand-over shown one by one, and those only
    /// shown folded into a later state.
    pub handover_shown: u64,
    pub handover_folded: u64,
    /// Subscriptions acknowledged with other task ids than named.
    pub ack_mismatch: u64,
    /// Messages of no expected shape.
    pub unexpected: u64,
    /// The first few failures and unexpected messages.
    pub examples: Vec<String>,
}

/// Checks session streams and subscriptions apart.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Tally {
    pub session_streams: Checks,
    pub subscriptions: Checks,
}

impl Tally {
    pub(crate) fn of(heard: &[Heard], tasks_of_session: &[Vec<usize>], marks: &Marks) -> Self {
        let mut tally = Tally::default();
        for one in heard {
            let (checks, followed, progress) = match &one.kind {
                Kind::Session(session) => (
                    &mut tally.session_streams,
                    tasks_of_session[*session].clone(),
                    true,
                ),
                Kind::Listen(tasks) => (&mut tally.subscriptions, tasks.clone(), false),
            };
            checks.streams += 1;
            checks.foreign += one.foreign;
            checks.ack_mismatch += one.ack_mismatch;
            checks.unexpected += one.unexpected.len() as u64;
            if let Some(failure) = &one.failure {
                checks.failed += 1;
                note(checks, failure);
            }
            for example in &one.unexpected {
                note(checks, example);
            }
            for task in followed {
                let status = one.status.get(&task).map_or(&[][..], Vec::as_slice);
                let range = marks.before[task] + 1..=marks.measured[task];
                checks.missing += missing(status, range.clone());
                if progress {
                    let shown = one.progress.get(&task).map_or(&[][..], Vec::as_slice);
                    checks.missing_progress += missing(shown, range);
                }
                let mut seen = std::collections::HashSet::new();
                let mut highest = 0;
                for &seq in status {
                    if !seen.insert(seq) {
                        checks.duplicates += 1;
                    } else if seq < highest {
                        checks.out_of_order += 1;
                    }
                    highest = highest.max(seq);
                }
                if marks.last[task] > 0 && highest != marks.last[task] {
                    checks.latest_not_shown += 1;
                }
                for seq in marks.measured[task] + 1..=marks.last[task] {
                    if seen.contains(&seq) {
                        checks.handover_shown += 1;
                    } else {
                        checks.handover_folded += 1;
                    }
                }
            }
        }
        tally
    }

    /// Whether every must-be-zero check is zero.
    pub fn complete(&self) -> bool {
        [&self.session_streams, &self.subscriptions]
            .iter()
            .all(|c| {
                c.failed
                    + c.foreign
                    + c.missing
                    + c.missing_progress
                    + c.latest_not_shown
                    + c.ack_mismatch
                    == 0
            })
    }
}

fn note(checks: &mut Checks, what: &str) {
    if checks.examples.len() < 5 {
        checks.examples.push(what.chars().take(300).collect());
    }
}

/// How many of `range` are not in `shown`.
fn missing(shown: &[u64], range: std::ops::RangeInclusive<u64>) -> u64 {
    let shown: std::collections::HashSet<u64> = shown.iter().copied().collect();
    range.filter(|seq| !shown.contains(seq)).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::stats::Recorded;

    fn heard(kind: Kind, status: &[(usize, &[u64])], progress: &[(usize, &[u64])]) -> Heard {
        let map = |pairs: &[(usize, &[u64])]| {
            pairs
                .iter()
                .map(|(task, seqs)| (*task, seqs.to_vec()))
                .collect()
        };
        Heard {
            kind,
            status: map(status),
            progress: map(progress),
            foreign: 0,
            ack_mismatch: 0,
            unexpected: Vec::new(),
            recorded: Recorded::new(),
            failure: None,
        }
    }

    #[test]
    fn gaps_duplicates_order_and_the_hand_over_are_counted() {
        // Task 0 in session 0: 2 changes before, 3 measured, 2 in the hand-over.
        let marks = Marks {
            before: vec![2, 0],
            measured: vec![5, 0],
            last: vec![7, 0],
        };
        let sessions = vec![vec![0], vec![1]];
        let whole = heard(
            Kind::Session(0),
            &[(0, &[3, 4, 5, 7])],
            &[(0, &[3, 4, 5, 6, 7])],
        );
        let tally = Tally::of(&[whole], &sessions, &marks);
        let checks = &tally.session_streams;
        assert_eq!((checks.missing, checks.missing_progress), (0, 0));
        assert_eq!((checks.handover_shown, checks.handover_folded), (1, 1));
        assert_eq!(checks.latest_not_shown, 0);
        assert!(tally.complete());

        let gappy = heard(Kind::Session(0), &[(0, &[3, 5, 5, 4, 6])], &[]);
        let tally = Tally::of(&[gappy], &sessions, &marks);
        let checks = &tally.session_streams;
        assert_eq!(checks.missing, 0);
        assert_eq!(checks.missing_progress, 3);
        assert_eq!((checks.duplicates, checks.out_of_order), (1, 1));
        assert_eq!(checks.latest_not_shown, 1);
        assert!(!tally.complete());

        let listen = heard(Kind::Listen(vec![0]), &[(0, &[4, 5, 7])], &[]);
        let tally = Tally::of(&[listen], &sessions, &marks);
        assert_eq!(tally.subscriptions.missing, 1);
        assert_eq!(tally.subscriptions.missing_progress, 0);
    }
}
