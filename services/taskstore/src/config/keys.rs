//! The flags of `taskstore keys` (what it does is `cli::keys`).

use clap::{Args, Subcommand};

use super::DatabaseArgs;

#[derive(Debug, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub action: KeysAction,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

#[derive(Debug, Subcommand)]
pub enum KeysAction {
    /// Make a key and print it (once: store it now).
    Create {
        /// The tenant the key acts in; `*` for every tenant (workers of a
        /// shared fleet, operators).
        #[arg(long)]
        tenant: String,
        /// client (the task-store API), worker (running tasks) or admin.
        #[arg(long)]
        role: String,
        /// A note for `keys list`: who holds it, what for.
        #[arg(long, default_value = "")]
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// List every key (never the keys themselves).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key by its id (the part after `tsk_`, before the second
    /// `_`, as `keys list` shows it); it stops working within seconds.
    Revoke { key_id: String },
}
