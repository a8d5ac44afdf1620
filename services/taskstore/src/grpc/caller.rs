//! The caller of an RPC, as the authentication layer left it, and the
//! tenant the request acts in: the caller's own, or, for a caller reaching
//! every tenant (fleet workers, operators), the one named in the
//! `x-taskstore-tenant` metadata (which such credentials must send; only
//! without authentication does no tenant mean the default one).

use tonic::{Request, Status};

use crate::domain::{Caller, Operation, TenantId, TenantRefused, acts_only_through_its_attempt};

pub use taskstore_proto::TENANT_METADATA;

/// The authenticated caller. Every request has one once past the
/// authentication layer; a request without is refused (fail closed).
pub(super) fn caller_of<T>(request: &Request<T>) -> Result<&Caller, Status> {
    request
        .extensions()
        .get::<Caller>()
        .ok_or_else(|| Status::unauthenticated("missing or invalid credentials"))
}

/// The tenant `request` acts in, `named` by its body (the execution API)
/// or else by its metadata.
pub(super) fn tenant_of<T>(
    request: &Request<T>,
    named: Option<TenantId>,
) -> Result<TenantId, Status> {
    let caller = caller_of(request)?;
    let named = match named {
        Some(tenant) => Some(tenant),
        None => named_in_metadata(request)?,
    };
    caller.tenant_for(named.as_ref()).map_err(refused_status)
}

fn refused_status(refused: TenantRefused) -> Status {
    match refused {
        TenantRefused::Foreign => Status::permission_denied(refused.to_string()),
        TenantRefused::NotNamed => Status::invalid_argument(refused.to_string()),
    }
}

/// The tenants the messages of a client stream act in, each checked as
/// [`tenant_of`] checks a request's (named in the message, else in the
/// stream's metadata).
#[derive(Debug, Clone)]
pub(super) struct StreamTenants {
    caller: Caller,
    in_metadata: Option<TenantId>,
}

impl StreamTenants {
    pub(super) fn of<T>(request: &Request<T>) -> Result<Self, Status> {
        Ok(Self {
            caller: caller_of(request)?.clone(),
            in_metadata: named_in_metadata(request)?,
        })
    }

    /// The tenant a message naming `raw` (empty: none) acts in.
    pub(super) fn tenant(&self, raw: &str) -> Result<TenantId, Status> {
        let named = if raw.is_empty() {
            self.in_metadata.clone()
        } else {
            Some(
                TenantId::parse(raw)
                    .map_err(|err| crate::error::StoreError::invalid("tenant_id", err))?,
            )
        };
        self.caller
            .tenant_for(named.as_ref())
            .map_err(refused_status)
    }
}

fn named_in_metadata<T>(request: &Request<T>) -> Result<Option<TenantId>, Status> {
    let Some(value) = request.metadata().get(TENANT_METADATA) else {
        return Ok(None);
    };
    let raw = value
        .to_str()
        .map_err(|_| Status::invalid_argument(format!("{TENANT_METADATA} must be ASCII")))?;
    TenantId::parse(raw)
        .map(Some)
        .map_err(|err| Status::invalid_argument(format!("{TENANT_METADATA} {err}")))
}

/// Refuses a caller that may do `operation` on a task only through an
/// attempt it holds (a worker: `access::acts_only_through_its_attempt`)
/// when the request carries no lease.
pub(super) fn through_an_attempt<T>(
    request: &Request<T>,
    operation: Operation,
    carries_lease: bool,
) -> Result<(), Status> {
    let caller = caller_of(request)?;
    if !carries_lease && acts_only_through_its_attempt(caller, operation) {
        return Err(Status::permission_denied(format!(
            "the {} role reads and reports on a task only through the attempt it holds: pass that attempt's lease_token (WatchTask, UpdateTaskStatus, StoreTaskResult)",
            caller.role
        )));
    }
    Ok(())
}

/// Whether `request`'s caller reaches every tenant and names none (an
/// operator's view across tenants, where one is allowed).
pub(super) fn reaches_every_tenant_unnamed<T>(request: &Request<T>) -> bool {
    caller_of(request).is_ok_and(|caller| caller.reach == crate::domain::Reach::AllTenants)
        && matches!(named_in_metadata(request), Ok(None))
}
