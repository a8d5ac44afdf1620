//! A child process's JSON log lines, echoed and kept as they come.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use serde_json::Value;

/// A process's JSON log lines, as they come.
pub struct Logs {
    lines: std::sync::mpsc::Receiver<String>,
    pub seen: Vec<Value>,
}

impl Logs {
    pub(super) fn follow(stderr: std::process::ChildStderr, name: &str) -> Self {
        let (sender, lines) = std::sync::mpsc::channel();
        let name = name.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{name}] {line}");
                let _ = sender.send(line);
            }
        });
        Self {
            lines,
            seen: Vec::new(),
        }
    }

    /// The first (further) event for which `matches` holds.
    pub fn wait_for(&mut self, timeout: Duration, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no such log line within {timeout:?}; seen: {:#?}",
                    self.seen
                )
            });
            let event: Value = serde_json::from_str(&line)
                .unwrap_or_else(|err| panic!("every log line is JSON ({err}): {line}"));
            let Keys(keys) = serde_json::from_str(&line).expect("a JSON object");
            let mut unique = keys.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), keys.len(), "a log line repeats a key: {line}");
            self.seen.push(event.clone());
            if matches(&event) {
                return event;
            }
        }
    }
}

/// The top-level keys of a JSON object, in order, repeats included (which
/// `Value` would silently merge).
struct Keys(Vec<String>);

impl<'de> serde::Deserialize<'de> for Keys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Keys;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some((key, serde::de::IgnoredAny)) = map.next_entry()? {
                    keys.push(key);
                }
                Ok(Keys(keys))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}
