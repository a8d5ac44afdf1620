//! The web dashboard over HTTP, through a real service on PostgreSQL with
//! API keys: who may see and do what, hostile requests, the security
//! headers, live events kept to the viewer's tenant. The browser proof
//! (pages rendered in Chromium, live updates, keyboard, accessibility) is
//! `tests/browser/`.

#[path = "../common/mod.rs"]
mod common;

mod access;
mod attempts;
mod dispatch;
mod harness;
mod hostile;
mod issuer;
mod sign_on;
mod slow_clients;
