//! Small helpers every scenario shares: a per-client pseudo-random walk and
//! the wall clock in microseconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// A cheap per-client pseudo-random walk (xorshift) over what clients read,
/// so that they do not all hit the same rows in the same order.
pub(crate) struct Walk(u64);

impl Walk {
    pub(crate) fn new(client: usize) -> Self {
        Self(0x9E37_79B9_7F4A_7C15 ^ (client as u64 + 1))
    }

    /// The next pick in `0..n` (`n` > 0).
    pub(crate) fn next_below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

pub(crate) fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
