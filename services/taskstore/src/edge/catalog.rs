//! The tools served now, as every edge lists and checks them: the worker
//! registry read at most once a second per catalog (so a burst of calls, or
//! of calls to unknown tools, is not a burst of registry reads), each
//! tenant shown the tools of the workers it sees (the fleet's and its own:
//! `domain::fleet::served_tools_of`), and a call's arguments checked
//! against its tool's `inputSchema` before a task exists (compiled schemas
//! kept, so a tool's schema is compiled once, not per call).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::domain::schema_check::{Validator, compile, first_violation};
use crate::domain::{FleetPolicy, ServedTool, TenantId, ToolDescription, WorkerInfo};
use crate::domain::{ToolName, served_tools, served_tools_of};
use crate::error::StoreError;
use crate::store::operations::OperationsStore;

const FRESH_FOR: Duration = Duration::from_secs(1);
/// Compiled schemas kept; past this many, the cache starts over.
const MAX_SCHEMAS: usize = 512;

#[derive(Debug, Default)]
pub struct ToolCatalog {
    last: Mutex<Option<(Instant, Arc<Vec<WorkerInfo>>)>>,
    /// Compiled schemas by their text (a schema that does not compile is
    /// kept as `None`: its calls are not checked).
    schemas: Mutex<HashMap<String, Option<Arc<Validator>>>>,
    /// The tools whose workers describe them differently, last seen.
    disagreeing: Mutex<HashSet<ToolName>>,
}

impl ToolCatalog {
    /// The tools served to `tenant`.
    pub async fn served(
        &self,
        operations: &dyn OperationsStore,
        fleet: &FleetPolicy,
        tenant: &TenantId,
    ) -> Result<Vec<ServedTool>, StoreError> {
        Ok(served_tools_of(
            tenant,
            &self.workers(operations, fleet).await?,
        ))
    }

    /// Tool `name` as served to `tenant`, if it is.
    pub async fn tool(
        &self,
        operations: &dyn OperationsStore,
        fleet: &FleetPolicy,
        tenant: &TenantId,
        name: &ToolName,
    ) -> Result<Option<ServedTool>, StoreError> {
        Ok(self
            .served(operations, fleet, tenant)
            .await?
            .into_iter()
            .find(|tool| &tool.name == name))
    }

    /// Logs, once each time it starts, a tool that its workers describe
    /// differently (another schema, say: calls may fail on some of them),
    /// and when they agree again. `taskstore status`, the dashboard and
    /// GetStatus say which worker describes it how.
    pub async fn note_disagreements(&self, operations: &dyn OperationsStore, fleet: &FleetPolicy) {
        let Ok(workers) = self.workers(operations, fleet).await else {
            return;
        };
        let now: HashSet<ToolName> = served_tools(&workers)
            .into_iter()
            .filter(|tool| tool.descriptions > 1)
            .map(|tool| tool.name)
            .collect();
        let mut before = self
            .disagreeing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for tool in now.difference(&before) {
            tracing::warn!(tool = %tool, "workers describe this tool differently; calls may fail on some of them (taskstore status shows which worker says what)");
        }
        for tool in before.difference(&now) {
            tracing::info!(tool = %tool, "the workers of this tool describe it alike again");
        }
        *before = now;
    }

    /// Whether `arguments` are what `tool` takes: `arguments.field: what is
    /// wrong` when they are not.
    pub fn check_arguments(&self, tool: &ToolDescription, arguments: &Value) -> Result<(), String> {
        let Some(validator) = self.validator(tool) else {
            return Ok(());
        };
        match first_violation(&validator, arguments, "arguments") {
            None => Ok(()),
            Some(violation) => Err(format!(
                "{violation} (tool {} takes arguments as its inputSchema says)",
                tool.name
            )),
        }
    }

    fn validator(&self, tool: &ToolDescription) -> Option<Arc<Validator>> {
        let text = tool.input_schema.as_str();
        let mut schemas = self.schemas.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = schemas.get(text) {
            return known.clone();
        }
        let compiled = serde_json::from_str::<Value>(text)
            .map_err(|err| err.to_string())
            .and_then(|schema| compile(&schema));
        let compiled = match compiled {
            Ok(validator) => Some(Arc::new(validator)),
            Err(err) => {
                tracing::warn!(tool = %tool.name, error = %err, "a tool's input schema does not compile; its calls are not checked");
                None
            }
        };
        if schemas.len() >= MAX_SCHEMAS {
            schemas.clear();
        }
        schemas.insert(text.to_owned(), compiled.clone());
        compiled
    }

    async fn workers(
        &self,
        operations: &dyn OperationsStore,
        fleet: &FleetPolicy,
    ) -> Result<Arc<Vec<WorkerInfo>>, StoreError> {
        if let Some((at, workers)) = self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            && at.elapsed() < FRESH_FOR
        {
            return Ok(workers.clone());
        }
        let workers = Arc::new(operations.workers(fleet.seen_within).await?);
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((Instant::now(), workers.clone()));
        Ok(workers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{JsonObject, TaskSupport};
    use serde_json::json;

    #[test]
    fn arguments_are_held_to_the_tools_schema() {
        let tool = ToolDescription::parse(
            ToolName::parse("count").expect("name"),
            "",
            "counts",
            r#"{"type":"object","properties":{"to":{"type":"integer","minimum":1}},"required":["to"]}"#,
            TaskSupport::Optional,
        )
        .expect("description");
        let catalog = ToolCatalog::default();
        assert_eq!(catalog.check_arguments(&tool, &json!({"to": 3})), Ok(()));
        let refused = catalog
            .check_arguments(&tool, &json!({"to": "three"}))
            .expect_err("refused");
        assert!(refused.starts_with("arguments.to: "), "{refused}");
        assert!(catalog.check_arguments(&tool, &json!({})).is_err());
        let open = ToolDescription {
            input_schema: JsonObject::parse("{}").expect("json"),
            ..tool
        };
        assert_eq!(catalog.check_arguments(&open, &json!({"any": 1})), Ok(()));
    }
}
