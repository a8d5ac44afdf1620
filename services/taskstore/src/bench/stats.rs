//! Latency samples and their summary.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// Latencies of one kind of operation, in microseconds.
#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<u64>);

impl Samples {
    pub fn record(&mut self, latency: Duration) {
        self.0
            .push(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX));
    }

    pub fn record_micros(&mut self, micros: u64) {
        self.0.push(micros);
    }

    pub fn merge(&mut self, other: Samples) {
        self.0.extend(other.0);
    }

    pub fn summary(mut self, elapsed: Duration) -> Summary {
        self.0.sort_unstable();
        let at = |q: f64| {
            let index = ((self.0.len() as f64 - 1.0) * q).round() as usize;
            self.0.get(index).copied().unwrap_or(0) as f64 / 1000.0
        };
        let mean_ms = if self.0.is_empty() {
            0.0
        } else {
            self.0.iter().map(|&us| us as f64).sum::<f64>() / self.0.len() as f64 / 1000.0
        };
        Summary {
            count: self.0.len() as u64,
            mean_ms,
            per_second: self.0.len() as f64 / elapsed.as_secs_f64().max(1e-9),
            p50_ms: at(0.50),
            p95_ms: at(0.95),
            p99_ms: at(0.99),
            max_ms: self.0.last().copied().unwrap_or(0) as f64 / 1000.0,
        }
    }
}

/// One operation's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub count: u64,
    pub mean_ms: f64,
    pub per_second: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Samples by operation name.
pub type Recorded = BTreeMap<&'static str, Samples>;

pub fn merge(into: &mut Recorded, from: Recorded) {
    for (name, samples) in from {
        into.entry(name).or_default().merge(samples);
    }
}

/// The samples of `name` in `recorded` (created on first use).
pub(crate) fn samples<'a>(recorded: &'a mut Recorded, name: &'static str) -> &'a mut Samples {
    recorded.entry(name).or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let mut samples = Samples::default();
        for ms in 1..=100 {
            samples.record(Duration::from_millis(ms));
        }
        let summary = samples.summary(Duration::from_secs(2));
        assert_eq!(summary.count, 100);
        assert!((summary.per_second - 50.0).abs() < 1e-9);
        assert!((summary.p50_ms - 51.0).abs() < 1.01);
        assert!((summary.p99_ms - 99.0).abs() < 1.01);
        assert!((summary.max_ms - 100.0).abs() < 1e-9);
    }
}
