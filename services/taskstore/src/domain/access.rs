//! Who may do what: the caller an authenticated request acts as, the
//! operations a request can amount to, the rights of each role, and the
//! tenant a request acts in. Pure decisions, written once: every edge
//! (gRPC, `/mcp`, the dashboard) maps its requests to an [`Operation`] and
//! asks [`may`].

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

/// What a request asks to do, whichever edge it comes through: a gRPC
/// method, an MCP method, a dashboard page or form. Each edge maps its
/// requests onto these once ([`Operation::of_rpc`], `mcp::methods`, the
/// dashboard's routes); who may do which is written once, in [`may`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// One task by its id: the task, its result, its changes.
    ReadTask,
    /// Browse: list the tasks, follow every change of them.
    ListTasks,
    /// The tools served now.
    ReadTools,
    /// A task's questions and their answers.
    ReadQuestions,
    CreateTask,
    /// Report on a task: progress and the result (a worker's attempt, or a
    /// caller running its own task).
    ReportOnTask,
    /// Hold a task the caller runs in its own process.
    HoldTask,
    CancelTask,
    DeleteTask,
    AnswerQuestions,
    /// Delete the expired tasks of every tenant.
    CleanupExpired,
    /// The execution API: claim, renew, release, ask, heartbeat.
    RunAttempts,
    /// The service's status, across tenants.
    ReadStatus,
}

impl Operation {
    pub const ALL: [Operation; 13] = [
        Operation::ReadTask,
        Operation::ListTasks,
        Operation::ReadTools,
        Operation::ReadQuestions,
        Operation::CreateTask,
        Operation::ReportOnTask,
        Operation::HoldTask,
        Operation::CancelTask,
        Operation::DeleteTask,
        Operation::AnswerQuestions,
        Operation::CleanupExpired,
        Operation::RunAttempts,
        Operation::ReadStatus,
    ];

    /// The operation a gRPC method amounts to (`service` and `method` as
    /// in the request path, `/mcp.tasks.v1.TaskStore/CreateTask`); `None`
    /// for a method of no service of ours.
    pub fn of_rpc(service: &str, method: &str) -> Option<Self> {
        use Operation::*;
        Some(match (service, method) {
            ("mcp.tasks.v1.TaskStore", method) => match method {
                "GetTask" | "GetTaskResult" | "WatchTask" => ReadTask,
                "ListTasks" | "WatchTasks" => ListTasks,
                "ListTools" => ReadTools,
                "ListInputRequests" => ReadQuestions,
                "CreateTask" => CreateTask,
                "UpdateTaskStatus" | "StoreTaskResult" => ReportOnTask,
                "HoldTask" => HoldTask,
                "CancelTask" => CancelTask,
                "DeleteTask" => DeleteTask,
                "AnswerInputRequests" => AnswerQuestions,
                "CleanupExpired" => CleanupExpired,
                _ => return None,
            },
            ("mcp.tasks.v1.TaskExecution", _) => RunAttempts,
            ("mcp.tasks.v1.Operations", _) => ReadStatus,
            _ => return None,
        })
    }

    /// Whether it changes anything (a read-only viewer may not).
    pub fn changes_anything(self) -> bool {
        !matches!(
            self,
            Operation::ReadTask
                | Operation::ListTasks
                | Operation::ReadTools
                | Operation::ReadQuestions
                | Operation::ReadStatus
        )
    }

    /// Whether it sees or changes every tenant at once.
    fn is_global(self) -> bool {
        matches!(self, Operation::CleanupExpired | Operation::ReadStatus)
    }
}

/// Whether `caller` may do `operation`: its role's rights, and, for what
/// sees or changes every tenant at once (status, cleanup), credentials
/// that reach every tenant.
pub fn may(caller: &Caller, operation: Operation) -> bool {
    role_may(caller.role, operation)
        && (!operation.is_global() || caller.reach == Reach::AllTenants)
}

/// Whether `caller` may call the gRPC method `service/method` (as in the
/// request path): the operation it amounts to, if any, and [`may`].
pub fn may_call(caller: &Caller, service: &str, method: &str) -> bool {
    Operation::of_rpc(service, method).is_some_and(|operation| may(caller, operation))
}

/// Whether `caller` may do `operation` from the dashboard: what [`may`]
/// allows, but a deletion (irreversible, the result lost with the task)
/// only as an admin: a person at a browser acting with a client key, the
/// credential of an MCP server, should not wipe its tasks by a click.
pub fn may_in_dashboard(caller: &Caller, operation: Operation) -> bool {
    may(caller, operation) && (operation != Operation::DeleteTask || caller.role == Role::Admin)
}

/// Whether credentials of `role` may log in to the dashboard: a worker's
/// (a machine credential, running attempts) may not.
pub fn may_log_in(role: Role) -> bool {
    role != Role::Worker
}

/// The rights of each role. Anything not listed is refused.
fn role_may(role: Role, operation: Operation) -> bool {
    use Operation::*;
    match role {
        // The task-store API in its tenant: what MCP servers call.
        Role::Client => matches!(
            operation,
            ReadTask
                | ListTasks
                | ReadTools
                | ReadQuestions
                | CreateTask
                | ReportOnTask
                | HoldTask
                | CancelTask
                | DeleteTask
                | AnswerQuestions
        ),
        // Looks, changes nothing.
        Role::Viewer => !operation.changes_anything() && operation != ReadStatus,
        // A running attempt: its task, its reports, the tools; never a
        // listing of the tenant's tasks.
        Role::Worker => matches!(operation, RunAttempts | ReadTask | ReportOnTask | ReadTools),
        Role::Admin => operation != RunAttempts,
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
            (Role::Admin, store, "Unknown", false),
            (Role::Viewer, store, "GetTask", true),
            (Role::Viewer, store, "ListTasks", true),
            (Role::Viewer, store, "WatchTasks", true),
            (Role::Viewer, store, "ListInputRequests", true),
            (Role::Viewer, store, "CreateTask", false),
            (Role::Viewer, store, "CancelTask", false),
            (Role::Viewer, store, "AnswerInputRequests", false),
            (Role::Viewer, store, "StoreTaskResult", false),
            (Role::Viewer, store, "HoldTask", false),
            (Role::Viewer, operations, "GetStatus", false),
            (Role::Viewer, execution, "ClaimTask", false),
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

    #[test]
    fn in_the_dashboard_only_admins_delete_and_workers_never_log_in() {
        let acme = Reach::Tenant(tenant("acme"));
        let of = |role| Caller {
            subject: "k".into(),
            role,
            reach: acme.clone(),
        };
        assert!(may(&of(Role::Client), Operation::DeleteTask));
        assert!(!may_in_dashboard(&of(Role::Client), Operation::DeleteTask));
        assert!(may_in_dashboard(&of(Role::Client), Operation::CancelTask));
        assert!(may_in_dashboard(&of(Role::Admin), Operation::DeleteTask));
        assert!(!may_in_dashboard(&of(Role::Viewer), Operation::CancelTask));
        assert!(may_in_dashboard(&of(Role::Viewer), Operation::ListTasks));
        assert!(!may_log_in(Role::Worker));
        for role in [Role::Client, Role::Admin, Role::Viewer] {
            assert!(may_log_in(role));
        }
    }
}
