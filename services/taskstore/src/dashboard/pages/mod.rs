//! The dashboard's pages: each a function from what the stores answered to
//! markup, nothing else (the routes fetch, the pages draw).

pub mod attempts;
pub mod dispatch;
pub mod dispatch_chart;
pub mod login;
pub mod overview;
pub mod questions;
pub mod result;
pub mod sessions;
pub mod system;
pub mod task;
pub mod tasks;
pub mod tools;
pub mod workers;
