//! The samples behind a tool page's chart of waiting and running per key
//! (`domain::dispatch_history`): taken every `SAMPLE_EVERY` while the
//! dashboard serves, and whenever an operator reads a tool's page (that
//! read is a sample too). Each replica keeps its own, in memory: every
//! replica reads the same database, so their charts agree, and one that
//! restarted draws from its start.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use crate::domain::ToolDispatch;
use crate::domain::dispatch_history::{DispatchHistory, SAMPLE_EVERY, ToolHistory};
use crate::store::operations::OperationsStore;

#[derive(Debug, Default)]
pub(crate) struct DispatchSamples {
    history: Mutex<DispatchHistory>,
}

impl DispatchSamples {
    pub fn record(&self, view: &[ToolDispatch]) {
        self.history
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(Utc::now(), view);
    }

    pub fn of_tool(&self, tool: &str) -> ToolHistory {
        self.history
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .of_tool(tool)
    }

    /// Samples every `SAMPLE_EVERY` until `stop` fires; a failed read is
    /// a gap in the chart, said at debug level (the status says why).
    pub fn spawn(self: Arc<Self>, operations: Arc<dyn OperationsStore>, stop: CancellationToken) {
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(SAMPLE_EVERY);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = ticker.tick() => {}
                }
                match operations.dispatch_view().await {
                    Ok(view) => self.record(&view),
                    Err(err) => {
                        tracing::debug!(error = %err, "dispatch not sampled for the dashboard's chart");
                    }
                }
            }
        });
    }
}
