//! Who may do what: the operations a request can amount to and the rights
//! of each role. Pure decisions, written once: every edge (gRPC, `/mcp`,
//! the dashboard) maps its requests to an [`Operation`] and asks [`may`].
//! Who the caller is, and the tenant it acts in, is `caller`.

use super::caller::{Caller, Reach, Role};

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
    /// Steer governed dispatch across tenants (lift a key's pause).
    SteerDispatch,
}

impl Operation {
    pub const ALL: [Operation; 14] = [
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
        Operation::SteerDispatch,
    ];

    /// The operation a gRPC method amounts to (`service` and `method` as
    /// in the request path, `/mcp.tasks.v1.TaskStore/CreateTask`); `None`
    /// for a method of no service of ours.
    pub fn of_rpc(service: &str, method: &str) -> Option<Self> {
        use Operation::*;
        Some(match (service, method) {
            ("mcp.tasks.v1.TaskStore", method) => match method {
                "GetTask" | "GetTaskExecution" | "GetTaskResult" | "WatchTask" => ReadTask,
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
            ("mcp.tasks.v1.Operations", "LiftPause") => SteerDispatch,
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
        matches!(
            self,
            Operation::CleanupExpired | Operation::ReadStatus | Operation::SteerDispatch
        )
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

/// Whether `caller` may do `operation` on a task only through an attempt
/// it holds (carrying the attempt's lease): a worker reads and reports on
/// the tasks it runs, and on nothing else, so that a worker's credentials
/// reveal and change nothing of the tasks other workers run or callers
/// hold. A read without a lease (GetTask, GetTaskResult) is refused.
pub fn acts_only_through_its_attempt(caller: &Caller, operation: Operation) -> bool {
    caller.role == Role::Worker
        && matches!(operation, Operation::ReadTask | Operation::ReportOnTask)
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
    use crate::domain::TenantId;

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
            (Role::Admin, operations, "LiftPause", true),
            (Role::Client, operations, "LiftPause", false),
            (Role::Worker, operations, "LiftPause", false),
            (Role::Viewer, operations, "LiftPause", false),
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
    fn workers_read_and_report_only_through_their_attempts() {
        for role in Role::ALL {
            let who = Caller {
                role,
                ..caller(Reach::AllTenants)
            };
            for operation in Operation::ALL {
                let expected = role == Role::Worker
                    && matches!(operation, Operation::ReadTask | Operation::ReportOnTask);
                assert_eq!(
                    acts_only_through_its_attempt(&who, operation),
                    expected,
                    "{role} {operation:?}"
                );
            }
        }
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
