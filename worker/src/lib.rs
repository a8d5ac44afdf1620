//! The worker runtime for mcp-taskstore.
//!
//! Empty on purpose: workers that take dispatched tasks from RabbitMQ, run
//! them and report results through the gRPC API arrive with the dispatch
//! issue. The crate exists now so the workspace layout is final.
