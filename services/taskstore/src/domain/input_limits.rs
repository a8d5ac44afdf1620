//! Size limits on untrusted input, the same at every edge (gRPC, `/mcp`,
//! the dashboard): each parses its requests against these before anything
//! reaches the store.

use super::ids::SessionId;

/// Limits applied to every request before it reaches the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputLimits {
    /// `request_json` and `result_json`, in bytes.
    pub max_json_bytes: usize,
    /// `status_message`, in bytes.
    pub max_status_message_bytes: usize,
    /// `session_id`, in bytes.
    pub max_session_id_bytes: usize,
    /// A whole gRPC message, in bytes; larger ones are RESOURCE_EXHAUSTED
    /// before they are decoded.
    pub max_message_bytes: usize,
}

impl Default for InputLimits {
    fn default() -> Self {
        Self {
            max_json_bytes: 1024 * 1024,
            max_status_message_bytes: 4 * 1024,
            max_session_id_bytes: SessionId::DEFAULT_MAX_BYTES,
            max_message_bytes: 4 * 1024 * 1024,
        }
    }
}

impl InputLimits {
    /// Room for the other fields of a message beside its JSON payload.
    const ENVELOPE_BYTES: usize = 64 * 1024;

    pub fn validate(&self) -> Result<(), String> {
        if self.max_json_bytes == 0
            || self.max_status_message_bytes == 0
            || self.max_session_id_bytes == 0
        {
            return Err("input limits must be positive".to_owned());
        }
        if self.max_message_bytes < self.max_json_bytes.saturating_add(Self::ENVELOPE_BYTES) {
            return Err(format!(
                "the gRPC message limit must exceed the JSON limit by at least {} bytes",
                Self::ENVELOPE_BYTES
            ));
        }
        Ok(())
    }
}
