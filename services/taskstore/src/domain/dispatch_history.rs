//! The last hour of each tool's dispatch, for the dashboard's chart of
//! waiting and running per key: samples of `dispatch_view` taken every
//! [`SAMPLE_EVERY`] (and when an operator reads a tool's page), kept for
//! [`HISTORY_SPAN`]. Bounded whatever the fleet: per tool and sample, only
//! the [`KEYS_KEPT`] keys with the most waiting and running are kept.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::ToolDispatch;

/// How far back the chart goes.
pub const HISTORY_SPAN: Duration = Duration::from_secs(3600);
/// How often the dispatch is sampled in the background.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(30);
/// Samples closer than this to the last are not taken (a page read
/// right after another adds nothing).
const MIN_GAP: Duration = Duration::from_secs(5);
/// Keys kept per tool and sample, and shown per tool.
pub const KEYS_KEPT: usize = 8;
/// Most samples kept (a sample every [`MIN_GAP`] for the span).
const MAX_SAMPLES: usize = (HISTORY_SPAN.as_secs() / MIN_GAP.as_secs()) as usize;

/// A key's (key, waiting, running) in a sample.
type KeyPoint = (String, u64, u32);

#[derive(Debug, Clone)]
struct Sample {
    at: DateTime<Utc>,
    /// Per tool: its waiting, and its busiest keys.
    tools: BTreeMap<String, (u64, Vec<KeyPoint>)>,
}

/// The samples of the last [`HISTORY_SPAN`], oldest first, and the latest
/// view (the chart's last point, whether or not it was kept as a sample).
#[derive(Debug, Clone, Default)]
pub struct DispatchHistory {
    samples: VecDeque<Sample>,
    latest: Option<Sample>,
}

/// One tool's last hour, as the chart draws it: a point per sample.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolHistory {
    pub times: Vec<DateTime<Utc>>,
    /// The tool's waiting jobs, all keys together.
    pub waiting: Vec<u64>,
    /// Its busiest keys over the hour, busiest first.
    pub keys: Vec<KeySeries>,
}

/// One key's points (0 where a sample did not keep it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeySeries {
    pub key: String,
    pub waiting: Vec<u64>,
    pub running: Vec<u32>,
}

impl DispatchHistory {
    /// Keeps `view` as the latest, and as the sample at `at` unless the
    /// last sample is less than a few seconds old; forgets what is older
    /// than the span.
    pub fn record(&mut self, at: DateTime<Utc>, view: &[ToolDispatch]) {
        let tools = view
            .iter()
            .map(|tool| {
                let mut keys: Vec<KeyPoint> = tool
                    .keys
                    .iter()
                    .map(|key| (key.key.clone(), key.waiting, key.running))
                    .collect();
                keys.sort_by_key(|(_, waiting, running)| {
                    std::cmp::Reverse(waiting + u64::from(*running))
                });
                keys.truncate(KEYS_KEPT);
                (tool.tool.clone(), (tool.waiting, keys))
            })
            .collect();
        let sample = Sample { at, tools };
        self.latest = Some(sample.clone());
        let gap = chrono::Duration::from_std(MIN_GAP).unwrap_or_default();
        if self.samples.back().is_some_and(|last| at - last.at < gap) {
            return;
        }
        self.samples.push_back(sample);
        let span = chrono::Duration::from_std(HISTORY_SPAN).unwrap_or_default();
        while self
            .samples
            .front()
            .is_some_and(|first| at - first.at > span)
            || self.samples.len() > MAX_SAMPLES
        {
            self.samples.pop_front();
        }
    }

    /// The samples, and the latest view when it was not kept as one.
    fn points(&self) -> Vec<&Sample> {
        let mut points: Vec<&Sample> = self.samples.iter().collect();
        if let Some(latest) = &self.latest
            && points.last().is_none_or(|last| last.at < latest.at)
        {
            points.push(latest);
        }
        points
    }

    /// `tool`'s points, its busiest keys by their peak.
    pub fn of_tool(&self, tool: &str) -> ToolHistory {
        let points = self.points();
        let mut history = ToolHistory::default();
        let mut peaks: BTreeMap<&str, u64> = BTreeMap::new();
        for sample in &points {
            history.times.push(sample.at);
            let (waiting, keys) = sample
                .tools
                .get(tool)
                .map_or((0, &[][..]), |(waiting, keys)| (*waiting, keys.as_slice()));
            history.waiting.push(waiting);
            for (key, waiting, running) in keys {
                let peak = peaks.entry(key).or_default();
                *peak = (*peak).max(waiting + u64::from(*running));
            }
        }
        let mut busiest: Vec<(&str, u64)> = peaks.into_iter().collect();
        busiest.sort_by_key(|(key, peak)| (std::cmp::Reverse(*peak), *key));
        busiest.truncate(KEYS_KEPT);
        history.keys = busiest
            .into_iter()
            .map(|(key, _)| {
                let point = |sample: &&Sample| {
                    sample
                        .tools
                        .get(tool)
                        .and_then(|(_, keys)| keys.iter().find(|(k, _, _)| k == key))
                        .map_or((0, 0), |(_, waiting, running)| (*waiting, *running))
                };
                KeySeries {
                    key: key.to_owned(),
                    waiting: points.iter().map(|s| point(s).0).collect(),
                    running: points.iter().map(|s| point(s).1).collect(),
                }
            })
            .collect();
        history
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::KeyDispatch;

    fn view(waiting: u64, keys: &[(&str, u64, u32)]) -> Vec<ToolDispatch> {
        vec![ToolDispatch {
            tool: "fetch".into(),
            waiting,
            keys: keys
                .iter()
                .map(|(key, waiting, running)| KeyDispatch {
                    key: (*key).into(),
                    waiting: *waiting,
                    running: *running,
                    ..KeyDispatch::default()
                })
                .collect(),
            ..ToolDispatch::default()
        }]
    }

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(2_000_000_000 + secs, 0).expect("time")
    }

    #[test]
    fn a_tool_has_a_point_per_sample_and_its_busiest_keys() {
        let mut history = DispatchHistory::default();
        history.record(at(0), &view(5, &[("a", 3, 2), ("b", 0, 1)]));
        history.record(at(2), &view(99, &[]));
        history.record(at(30), &view(1, &[("b", 0, 9)]));
        let fetch = history.of_tool("fetch");
        assert_eq!(
            fetch.times,
            [at(0), at(30)],
            "one within 5 s of the last is not kept"
        );
        assert_eq!(fetch.waiting, [5, 1]);
        // ... but it is the last point until the next sample.
        history.record(at(31), &view(7, &[]));
        assert_eq!(history.of_tool("fetch").waiting, [5, 1, 7]);
        history.record(at(32), &view(8, &[]));
        assert_eq!(history.of_tool("fetch").waiting, [5, 1, 8]);
        history.record(at(40), &view(2, &[("b", 0, 9)]));
        assert_eq!(
            fetch.keys,
            [
                KeySeries {
                    key: "b".into(),
                    waiting: vec![0, 0],
                    running: vec![1, 9]
                },
                KeySeries {
                    key: "a".into(),
                    waiting: vec![3, 0],
                    running: vec![2, 0]
                },
            ],
            "by peak; 0 where a sample lacks the key"
        );
        let quiet = history.of_tool("mail");
        assert_eq!((quiet.waiting, quiet.keys), (vec![0, 0, 0], vec![]));
    }

    #[test]
    fn an_hour_is_kept_and_keys_are_bounded() {
        let mut history = DispatchHistory::default();
        let many: Vec<(String, u64, u32)> = (0..40).map(|n| (format!("k{n:02}"), n, 0)).collect();
        let many: Vec<(&str, u64, u32)> =
            many.iter().map(|(k, w, r)| (k.as_str(), *w, *r)).collect();
        for minute in 0..90 {
            history.record(at(minute * 60), &view(1, &many));
        }
        let fetch = history.of_tool("fetch");
        assert_eq!(
            fetch.times.first(),
            Some(&at(29 * 60)),
            "the last hour only"
        );
        assert_eq!(fetch.times.len(), 61);
        assert_eq!(fetch.keys.len(), KEYS_KEPT);
        assert_eq!(fetch.keys[0].key, "k39", "the busiest first");
    }
}
