//! Who may do what: the caller an authenticated request acts as, the rights
//! of each role, and the tenant a request acts in. Pure decisions; the
//! gRPC edge asks them once per call.

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
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Client, Role::Worker, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Worker => "worker",
            Role::Admin => "admin",
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
#[error("must be client, worker or admin")]
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

/// Whether `caller` may call `service/method`: its role's rights, and, for
/// the calls that see or change every tenant at once (status, cleanup),
/// credentials that reach every tenant.
pub fn may_call(caller: &Caller, service: &str, method: &str) -> bool {
    let global = matches!(
        (service, method),
        ("mcp.tasks.v1.Operations", _) | ("mcp.tasks.v1.TaskStore", "CleanupExpired")
    );
    role_may_call(caller.role, service, method) && (!global || caller.reach == Reach::AllTenants)
}

/// The RPCs a role may call: `service` and `method` as in the request path
/// (`/mcp.tasks.v1.TaskStore/CreateTask`). Anything not listed is refused.
fn role_may_call(role: Role, service: &str, method: &str) -> bool {
    const STORE: &str = "mcp.tasks.v1.TaskStore";
    const EXECUTION: &str = "mcp.tasks.v1.TaskExecution";
    const OPERATIONS: &str = "mcp.tasks.v1.Operations";
    // What a running attempt calls on the task-store API: progress, the
    // result, and whether the task was cancelled.
    const ATTEMPT_REPORTS: [&str; 6] = [
        "GetTask",
        "GetTaskResult",
        "WatchTask",
        "UpdateTaskStatus",
        "StoreTaskResult",
        "ListTools",
    ];
    match (role, service) {
        (Role::Client, STORE) => method != "CleanupExpired",
        (Role::Worker, STORE) => ATTEMPT_REPORTS.contains(&method),
        (Role::Worker, EXECUTION) => true,
        (Role::Admin, STORE | OPERATIONS) => true,
        _ => false,
    }
}

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
    fn rights_by_role() {
        let store = "mcp.tasks.v1.TaskStore";
        let execution = "mcp.tasks.v1.TaskExecution";
        let operations = "mcp.tasks.v1.Operations";
        let table = [
            (Role::Client, store, "CreateTask", true),
            (Role::Client, store, "ListTasks", true),
            (Role::Client, store, "CleanupExpired", false),
            (Role::Client, execution, "ClaimTask", false),
            (Role::Client, operations, "GetStatus", false),
            (Role::Worker, store, "StoreTaskResult", true),
            (Role::Worker, store, "WatchTask", true),
            (Role::Worker, store, "WatchTasks", false),
            (Role::Client, store, "WatchTasks", true),
            (Role::Worker, store, "CreateTask", false),
            (Role::Worker, store, "ListTasks", false),
            (Role::Worker, store, "CancelTask", false),
            (Role::Worker, store, "DeleteTask", false),
            (Role::Client, store, "DeleteTask", true),
            (Role::Worker, execution, "ClaimTask", true),
            (Role::Worker, operations, "GetStatus", false),
            (Role::Admin, store, "CleanupExpired", true),
            (Role::Admin, operations, "GetStatus", true),
            (Role::Admin, execution, "ClaimTask", false),
            (Role::Admin, "grpc.other.Service", "Anything", false),
        ];
        for (role, service, method, allowed) in table {
            let everywhere = Caller {
                role,
                ..caller(Reach::AllTenants)
            };
            assert_eq!(
                may_call(&everywhere, service, method),
                allowed,
                "{role} {service}/{method}"
            );
        }
    }

    #[test]
    fn calls_that_span_tenants_need_credentials_for_all_of_them() {
        let admin = |reach| Caller {
            role: Role::Admin,
            ..caller(reach)
        };
        for (service, method) in [
            ("mcp.tasks.v1.Operations", "GetStatus"),
            ("mcp.tasks.v1.TaskStore", "CleanupExpired"),
        ] {
            assert!(may_call(&admin(Reach::AllTenants), service, method));
            assert!(!may_call(
                &admin(Reach::Tenant(tenant("acme"))),
                service,
                method
            ));
        }
        assert!(may_call(
            &admin(Reach::Tenant(tenant("acme"))),
            "mcp.tasks.v1.TaskStore",
            "ListTasks"
        ));
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
