//! Tools every worker can serve: built-ins for trying the system and for
//! tests, and command tools that run programs in any language.

pub mod builtin;
pub mod command;

pub use builtin::{BUILTIN_TOOLS, builtin};
pub use command::{CommandTool, CommandToolsFile};
