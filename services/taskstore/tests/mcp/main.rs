//! `taskstore mcp`: the MCP endpoint through real services on PostgreSQL
//! with real workers: both task revisions (2025-11-25 over plain JSON-RPC,
//! 2026-07-28 through the official Rust SDK `rmcp`), replicas answering for
//! each other's tasks, and hostile input. The TypeScript SDK's proof is in
//! `clients/typescript/test/mcp-gateway.test.ts`.

#[path = "../common/mod.rs"]
mod common;

mod core;
mod extension;
mod harness;
mod hostile;
mod idempotency;
mod notifications;
mod priority;
mod questions;
mod replicas;
mod slow_clients;
mod start_times;
