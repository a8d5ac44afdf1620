//! The conformance suite against every backend: PostgreSQL directly, and
//! PostgreSQL through the gRPC service and client.

mod common;
mod suite;

mod postgres {
    crate::conformance_suite!(crate::common::Postgres);
}

mod grpc_over_postgres {
    crate::conformance_suite!(crate::common::GrpcOverPostgres);
}
