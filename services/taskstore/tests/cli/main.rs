//! The `taskstore` binary end to end, as people and scripts use it: real
//! `serve` and `dev` processes on ephemeral ports with JSON logs, and the
//! client commands run against them.

#[path = "../common/mod.rs"]
mod common;

mod bench;
mod commands;
mod dev;
mod dispatch_status;
mod execution;
mod first_hour;
mod harness;
mod listing;
mod migrations;
mod operator;
mod pipes;
mod questions;
mod start_times;
mod vacuum;
