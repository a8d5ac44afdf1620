//! The tools the fleet serves now, as the gateway lists and checks them:
//! read from the worker registry at most once a second per replica, so a
//! burst of calls (or of calls to unknown tools) does not become a burst of
//! registry reads. A tool appears or goes within that second plus the
//! registry's own window.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::domain::{FleetPolicy, ServedTool, served_tools};
use crate::error::StoreError;
use crate::store::operations::OperationsStore;

const FRESH_FOR: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub(super) struct ServedCache {
    last: Mutex<Option<(Instant, Arc<Vec<ServedTool>>)>>,
}

impl ServedCache {
    pub(super) async fn get(
        &self,
        operations: &dyn OperationsStore,
        fleet: &FleetPolicy,
    ) -> Result<Arc<Vec<ServedTool>>, StoreError> {
        if let Some((at, tools)) = self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            && at.elapsed() < FRESH_FOR
        {
            return Ok(tools.clone());
        }
        let workers = operations.workers(fleet.seen_within).await?;
        let tools = Arc::new(served_tools(&workers));
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((Instant::now(), tools.clone()));
        Ok(tools)
    }
}
