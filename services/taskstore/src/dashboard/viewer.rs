//! Who looks at a page, once identified (`identify`): the caller, the
//! tenant it acts in (from the credential, never from the URL), and what it
//! may do there: the rights table of `domain::access`, plus the dashboard's
//! read-only switch.

use crate::domain::{Caller, Operation, Reach, TenantId, may_in_dashboard};

/// A logged-in viewer.
#[derive(Debug, Clone)]
pub struct Viewer {
    pub caller: Caller,
    pub tenant: TenantId,
    /// No action, whatever the credential allows (`--dashboard-read-only`).
    pub read_only: bool,
}

impl Viewer {
    /// Whether this viewer may do `operation` here.
    pub fn may(&self, operation: Operation) -> bool {
        may_in_dashboard(&self.caller, operation)
            && !(self.read_only && operation.changes_anything())
    }

    /// Whether this viewer sees what spans every tenant (the system page,
    /// the outbox).
    pub fn sees_every_tenant(&self) -> bool {
        self.caller.reach == Reach::AllTenants && self.may(Operation::ReadStatus)
    }
}
