//! Who a request comes from once authenticated: its role, the tenants its
//! credentials reach, and the tenant a request acts in. What each role may
//! do is the rights table of `access`.

use std::fmt;

use super::ids::TenantId;

/// What an identity may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The task-store API, in its tenant: what MCP servers call.
    Client,
    /// The execution API (claim, renew, release, heartbeat) and the reports
    /// of a running attempt (progress, result): what workers call.
    Worker,
    /// Everything but running tasks: the task-store API in any tenant it
    /// reaches, the operations API (status), cleanup.
    Admin,
    /// Read-only: tasks, their results and questions, the tools; nothing
    /// changed (dashboards, on-call people, auditors).
    Viewer,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Client, Role::Worker, Role::Admin, Role::Viewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Worker => "worker",
            Role::Admin => "admin",
            Role::Viewer => "viewer",
        }
    }

    pub fn parse(raw: &str) -> Result<Self, UnknownRole> {
        Role::ALL
            .into_iter()
            .find(|role| role.as_str() == raw)
            .ok_or(UnknownRole)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("must be client, worker, admin or viewer")]
pub struct UnknownRole;

/// The tenants an identity acts in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reach {
    /// One tenant, whatever a request says.
    Tenant(TenantId),
    /// Any tenant, named per request: a fleet of workers serving every
    /// tenant, or an operator. Only workers and admins are given it.
    AllTenants,
}

impl Reach {
    /// Written `*` for all tenants, else the tenant's id.
    pub fn parse(raw: &str) -> Result<Self, super::ids::InvalidId> {
        if raw == "*" {
            return Ok(Reach::AllTenants);
        }
        TenantId::parse(raw).map(Reach::Tenant)
    }
}

impl fmt::Display for Reach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reach::Tenant(tenant) => f.pad(tenant.as_str()),
            Reach::AllTenants => f.pad("*"),
        }
    }
}

/// Who a request comes from, once authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// For logs and audit: a key's id, a token's subject, a certificate's
    /// name. Never a secret.
    pub subject: String,
    pub role: Role,
    pub reach: Reach,
}

/// The subject of the one caller there is when authentication is off.
/// Authenticated subjects carry their method's prefix (`key:`, `jwt:`,
/// `cert:`), so none can be mistaken for it.
const ANONYMOUS: &str = "anonymous";

impl Caller {
    /// With authentication off (`--auth none`, `dev`): one caller with
    /// every right, in every tenant (the default one unless a request names
    /// another), as before authentication existed.
    pub fn unauthenticated() -> Self {
        Self {
            subject: ANONYMOUS.to_owned(),
            role: Role::Admin,
            reach: Reach::AllTenants,
        }
    }

    /// Whether this is the caller of a service without authentication.
    pub fn is_unauthenticated(&self) -> bool {
        self.subject == ANONYMOUS
    }

    /// The tenant a request acts in: the caller's own, or, for a caller
    /// that reaches all tenants, the one the request names. Credentials
    /// for every tenant must name one (a silent default would show an
    /// operator an empty tenant instead of theirs); only without
    /// authentication does an unnamed tenant mean the default one. A
    /// tenant-bound caller naming another tenant is refused.
    pub fn tenant_for(&self, named: Option<&TenantId>) -> Result<TenantId, TenantRefused> {
        match (&self.reach, named) {
            (Reach::Tenant(own), Some(named)) if named != own => Err(TenantRefused::Foreign),
            (Reach::Tenant(own), _) => Ok(own.clone()),
            (Reach::AllTenants, Some(named)) => Ok(named.clone()),
            (Reach::AllTenants, None) if self.is_unauthenticated() => {
                Ok(TenantId::default_tenant())
            }
            (Reach::AllTenants, None) => Err(TenantRefused::NotNamed),
        }
    }
}

/// Why a request cannot act in a tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TenantRefused {
    /// It named a tenant its caller does not reach.
    #[error("the credentials do not reach that tenant")]
    Foreign,
    /// Its credentials reach every tenant and it named none.
    #[error(
        "these credentials reach every tenant: name the one to act in ({TENANT_METADATA}; --tenant or TASKSTORE_TENANT in the CLI and client packages)"
    )]
    NotNamed,
}

/// Where a request names its tenant (gRPC metadata, an HTTP header).
pub const TENANT_METADATA: &str = taskstore_proto::TENANT_METADATA;

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str) -> TenantId {
        TenantId::parse(name).expect("tenant")
    }

    fn caller(reach: Reach) -> Caller {
        Caller {
            subject: "k".into(),
            role: Role::Client,
            reach,
        }
    }

    #[test]
    fn a_tenant_bound_caller_acts_in_its_tenant_only() {
        let bound = caller(Reach::Tenant(tenant("acme")));
        assert_eq!(bound.tenant_for(None), Ok(tenant("acme")));
        assert_eq!(bound.tenant_for(Some(&tenant("acme"))), Ok(tenant("acme")));
        assert_eq!(
            bound.tenant_for(Some(&tenant("globex"))),
            Err(TenantRefused::Foreign)
        );
    }

    #[test]
    fn a_caller_of_all_tenants_acts_in_the_named_one_and_must_name_one() {
        let fleet = caller(Reach::AllTenants);
        assert_eq!(
            fleet.tenant_for(Some(&tenant("globex"))),
            Ok(tenant("globex"))
        );
        assert_eq!(fleet.tenant_for(None), Err(TenantRefused::NotNamed));
    }

    #[test]
    fn without_authentication_an_unnamed_tenant_is_the_default_one() {
        let anonymous = Caller::unauthenticated();
        assert!(anonymous.is_unauthenticated());
        assert_eq!(anonymous.tenant_for(None), Ok(TenantId::default_tenant()));
        assert_eq!(
            anonymous.tenant_for(Some(&tenant("globex"))),
            Ok(tenant("globex"))
        );
        let named_anonymous_by_a_token = Caller {
            subject: "jwt:anonymous".into(),
            ..caller(Reach::AllTenants)
        };
        assert!(!named_anonymous_by_a_token.is_unauthenticated());
    }

    #[test]
    fn roles_and_reaches_are_parsed() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Ok(role));
        }
        assert_eq!(Role::parse("root"), Err(UnknownRole));
        assert_eq!(Reach::parse("*"), Ok(Reach::AllTenants));
        assert_eq!(Reach::parse("acme"), Ok(Reach::Tenant(tenant("acme"))));
        assert!(Reach::parse("").is_err());
    }
}
