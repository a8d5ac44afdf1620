//! What `mcp-streams` reads of the service it measures, from `/proc`
//! (Linux): CPU time and resident memory; and how it stops it (SIGTERM).

use std::time::{Duration, Instant};

/// A process whose CPU time and memory are read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured {
    pid: u32,
    tick: Duration,
}

/// CPU time used so far, and when it was read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuMark {
    used: Duration,
    at: Instant,
}

impl Measured {
    /// `None` when `pid` cannot be read (no such process, no `/proc`).
    pub(crate) fn new(pid: u32) -> Option<Self> {
        let measured = Self {
            pid,
            tick: clock_tick(),
        };
        measured.cpu().map(|_| measured)
    }

    /// The process's (every thread's) user and system time so far.
    pub(crate) fn cpu(&self) -> Option<CpuMark> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        // The command name may hold spaces and parentheses: fields count
        // from the last ')'. utime and stime are the 12th and 13th after it.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(CpuMark {
            used: self.tick * u32::try_from(ticks).ok()?,
            at: Instant::now(),
        })
    }

    /// Milliseconds of CPU per second of wall time since `since`.
    pub(crate) fn cpu_ms_per_s(&self, since: CpuMark) -> Option<f64> {
        let now = self.cpu()?;
        let wall = now.at.duration_since(since.at).as_secs_f64().max(1e-9);
        Some(now.used.saturating_sub(since.used).as_secs_f64() * 1000.0 / wall)
    }

    /// Resident memory, KiB.
    pub(crate) fn rss_kib(&self) -> Option<u64> {
        status_field(self.pid, "VmRSS:")
    }

    /// Whether the process ended (gone, or a zombie not yet reaped).
    pub(crate) fn exited(&self) -> bool {
        match std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        }
    }

    /// Asks the process to stop, as an orchestrator would.
    pub(crate) fn terminate(&self) -> Result<(), String> {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .map_err(|err| format!("kill: {err}"))?;
        status
            .success()
            .then_some(())
            .ok_or_else(|| format!("kill -TERM {} failed", self.pid))
    }
}

/// This process's own CPU time: the load generator's share of the machine.
pub(crate) fn own() -> Option<Measured> {
    Measured::new(std::process::id())
}

fn status_field(pid: u32, name: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The length of a clock tick (`getconf CLK_TCK`; 100 Hz on Linux unless
/// told otherwise).
fn clock_tick() -> Duration {
    let hertz = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse::<u32>().ok())
        .filter(|hz| *hz > 0)
        .unwrap_or(100);
    Duration::from_secs(1) / hertz
}
