//! The PostgreSQL side of the change feed (`store::changes`), in one place.
//!
//! Invariants (the conformance case `announced` and `tests/quiet_changes.rs`
//! hold the backends to them):
//! 1. **Every write that changes a task's status, message or last update
//!    is announced**, once committed, to every replica that follows the
//!    task's tenant. A write only needs to move `last_updated_at` (every
//!    statement does; `apply.rs` always does): the trigger of migrations
//!    0002/0012/0015 notifies the row, with the task, on
//!    `taskstore_task_changed`.
//! 2. **A quiet write tells its own replica instead.** The claim and
//!    status-change batches (`claim_batch.rs`, `transition_batch.rs`) skip
//!    the notification of a row no other replica follows ([`unheard!`],
//!    bumping `quiet_changes`, which the trigger reads as "stay silent"),
//!    and the writer hands the rows to [`Quiet::tell`] after the commit.
//!    No other statement may bump `quiet_changes`: every other write is
//!    loud.
//! 3. **No change falls between a registration and a read.** A tenant is
//!    registered (`registrations.rs`) before its first subscriber here
//!    reads anything, under a lock that waits for every statement that
//!    read the registrations; a registration lapses 30 s after its last
//!    renewal (`quiet::REGISTRATION_LIFETIME_SECS`, the same number as
//!    `unheard!`'s SQL).
//! 4. **A lost connection is a resync.** After every (re)connection the
//!    listener (`listener.rs`) tells every subscriber to read again,
//!    because notifications sent meanwhile are lost.
//! 5. **Older replicas keep the feed loud.** While a listener of an older
//!    version (which does not register) is connected, no write is quiet.
//! 6. **Creation and expiry are not announced** (nobody follows a task not
//!    yet created; watchers re-read every few seconds for expiry).
//!
//! `payload.rs` reads a notification into a feed event.

mod listener;
mod payload;
mod quiet;
mod registrations;

pub(super) use listener::spawn as listen;
pub(super) use quiet::{Quiet, Reach, unheard};
pub(super) use registrations::{ChangeListeners, new_replica_id};
