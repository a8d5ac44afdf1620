//! A task's dispatch priority: what a caller may ask for (up to its
//! tenant's cap) and how it is carried on `/mcp`.

/// A task's dispatch priority: 0 (the default) to [`Priority::MAX`]; a
/// higher one is published first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Priority(u8);

/// The `tools/call` `_meta` entry that carries a priority on `/mcp`.
pub const PRIORITY_META_KEY: &str = "mcp-taskstore/priority";

/// Why a priority was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be between 0 and {max}")]
pub struct InvalidPriority {
    /// The highest the caller may ask for.
    pub max: u8,
}

impl Priority {
    /// The highest priority there is.
    pub const MAX: u8 = 9;

    /// `raw` within `0..=cap` (a tenant's cap, at most [`Priority::MAX`]).
    pub fn parse(raw: u32, cap: u8) -> Result<Self, InvalidPriority> {
        let cap = cap.min(Self::MAX);
        u8::try_from(raw)
            .ok()
            .filter(|p| *p <= cap)
            .map(Self)
            .ok_or(InvalidPriority { max: cap })
    }

    /// A stored priority (clamped, so a row of a newer build still sorts).
    pub fn of_stored(stored: i16) -> Self {
        Self(u8::try_from(stored.clamp(0, i16::from(Self::MAX))).unwrap_or(0))
    }

    pub fn get(self) -> u8 {
        self.0
    }

    /// A priority in a `_meta` object: absent is `None`; a value that is
    /// not a whole number in range is refused.
    pub fn of_meta(
        meta: Option<&serde_json::Map<String, serde_json::Value>>,
        cap: u8,
    ) -> Result<Option<Self>, String> {
        let Some(value) = meta.and_then(|meta| meta.get(PRIORITY_META_KEY)) else {
            return Ok(None);
        };
        let refuse = |why: String| format!("params._meta[\"{PRIORITY_META_KEY}\"] {why}");
        let raw = value
            .as_u64()
            .and_then(|raw| u32::try_from(raw).ok())
            .ok_or_else(|| {
                refuse(
                    InvalidPriority {
                        max: cap.min(Self::MAX),
                    }
                    .to_string(),
                )
            })?;
        Self::parse(raw, cap)
            .map(Some)
            .map_err(|err| refuse(err.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_are_bounded_by_the_tenants_cap() {
        assert_eq!(Priority::parse(0, 9), Ok(Priority(0)));
        assert_eq!(Priority::parse(9, 9), Ok(Priority(9)));
        assert_eq!(Priority::parse(10, 9), Err(InvalidPriority { max: 9 }));
        assert_eq!(Priority::parse(4, 3), Err(InvalidPriority { max: 3 }));
        assert_eq!(
            Priority::parse(u32::MAX, 20),
            Err(InvalidPriority { max: 9 })
        );
        assert_eq!(Priority::of_stored(-3), Priority(0));
        assert_eq!(Priority::of_stored(40), Priority(9));
        let meta = |value: serde_json::Value| {
            let mut meta = serde_json::Map::new();
            meta.insert(PRIORITY_META_KEY.into(), value);
            meta
        };
        assert_eq!(Priority::of_meta(None, 9), Ok(None));
        assert_eq!(
            Priority::of_meta(Some(&meta(serde_json::json!(3))), 9),
            Ok(Some(Priority(3)))
        );
        for bad in [
            serde_json::json!(-1),
            serde_json::json!(2.5),
            serde_json::json!("3"),
            serde_json::json!(10),
        ] {
            assert!(
                Priority::of_meta(Some(&meta(bad.clone())), 9).is_err(),
                "{bad}"
            );
        }
    }
}
