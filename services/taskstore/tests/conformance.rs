//! The conformance suite against every backend, directly and through the
//! gRPC service and client.

mod common;
mod suite;

mod postgres {
    crate::conformance_suite!(crate::common::Postgres);
    crate::insights_suite!(crate::common::Postgres);
}

mod grpc_over_postgres {
    crate::conformance_suite!(crate::common::GrpcOverPostgres);
}

mod memory {
    crate::conformance_suite!(crate::common::Memory);
    crate::insights_suite!(crate::common::Memory);
}

mod grpc_over_memory {
    crate::conformance_suite!(crate::common::GrpcOverMemory);
}

mod sqlite {
    crate::conformance_suite!(crate::common::Sqlite);
    crate::insights_suite!(crate::common::Sqlite);
}

mod grpc_over_sqlite {
    crate::conformance_suite!(crate::common::GrpcOverSqlite);
}
