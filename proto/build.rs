//! Generates the Rust code for the `mcp.tasks.v1` contract with the protoc
//! binary vendored by `protoc-bin-vendored`, so a fresh clone builds without a
//! system protoc.

use std::env;
use std::path::PathBuf;

const PROTO_ROOT: &str = "mcp";
const PROTOS: &[&str] = &[
    "mcp/tasks/v1/task_store.proto",
    "mcp/tasks/v1/execution.proto",
    "mcp/tasks/v1/operations.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);

    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);

    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("mcp_tasks_v1_descriptor.bin"))
        .client_mod_attribute("mcp.tasks.v1", "#[cfg(feature = \"client\")]")
        .server_mod_attribute("mcp.tasks.v1", "#[cfg(feature = \"server\")]")
        // tonic-prost-build 0.14 prints no rerun-if-changed lines itself.
        .emit_rerun_if_changed(false)
        .compile_with_config(config, PROTOS, &["."])?;

    println!("cargo:rerun-if-changed={PROTO_ROOT}");
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    Ok(())
}
