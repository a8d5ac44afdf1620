//! Tools every worker can serve: built-ins for trying the system and for
//! tests, and command tools that run programs in any language.

pub mod builtin;
pub mod command;

use std::path::Path;

pub use builtin::{BUILTIN_TOOLS, builtin};
pub use command::{CommandTool, CommandToolsFile};

use crate::Worker;

/// Registers the built-ins named in `builtins` (`none` and blanks are
/// skipped) and the command tools of the file at `command_tools`: the one
/// way `taskworker` and the workers embedded in `taskstore dev` get their
/// tools. The error says which name or file is wrong.
pub fn register(
    mut worker: Worker,
    builtins: &[String],
    command_tools: Option<&Path>,
) -> Result<Worker, String> {
    for name in builtins
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty() && *t != "none")
    {
        let tool = builtin(name).ok_or_else(|| {
            format!(
                "unknown built-in tool {name:?} (known: {})",
                BUILTIN_TOOLS.join(", ")
            )
        })?;
        worker = worker
            .with_tool(name, tool)
            .map_err(|err| err.to_string())?;
    }
    if let Some(path) = command_tools {
        // Relative paths in the file mean "beside the file".
        let base = path
            .canonicalize()
            .ok()
            .and_then(|file| file.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        for (name, tool) in CommandToolsFile::load(path)?.into_tools(&base)? {
            worker = worker
                .with_tool(&name, tool)
                .map_err(|err| err.to_string())?;
        }
    }
    Ok(worker)
}
