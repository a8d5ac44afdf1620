//! TLS on the gRPC port, and `--auth mtls`: a client certificate from the
//! configured CA names its holder (`urn:taskstore:<role>:<tenant>`); one
//! from another CA, or none when certificates are the only way in, is
//! refused at the handshake; one that names nobody is UNAUTHENTICATED. The
//! clients are ours: the endpoint parser every client uses, and the CLI.

use std::path::PathBuf;
use std::process::Command;

use taskstore::auth::AuthMethod;
use taskstore::domain::Role;
use taskstore::settings::ServerTls;
use taskstore_proto::endpoint::{ClientTls, parse_secure_endpoint};
use tonic::{Code, Status};

use super::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}"))
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).expect("fixture")
}

/// A service serving TLS with the test server certificate, verifying
/// client certificates against the test CA, authenticating with `auth`.
async fn tls_world(auth: Vec<AuthMethod>) -> World {
    let require_client_cert = auth == [AuthMethod::Mtls];
    World::configured(Kind::Memory, StoreConfig::default(), |settings| {
        ServiceSettings {
            auth,
            tls: Some(ServerTls {
                cert_pem: read("server.pem"),
                key_pem: read("server.key"),
                client_ca_pem: Some(read("ca.pem")),
                require_client_cert,
            }),
            ..settings
        }
    })
    .await
}

/// Trusting the test CA, presenting the certificate `holder` (if any).
fn client_tls(holder: Option<&str>) -> ClientTls {
    ClientTls::from_files(
        Some(&fixture("ca.pem")),
        holder
            .map(|name| fixture(&format!("{name}.pem")))
            .as_deref(),
        holder
            .map(|name| fixture(&format!("{name}.key")))
            .as_deref(),
    )
    .expect("client tls")
}

fn https(world: &World) -> String {
    format!("https://localhost:{}", world.addr.port())
}

/// A connection to the world's TLS port, as our clients make it.
async fn channel(world: &World, tls: &ClientTls) -> Result<Channel, String> {
    let endpoint = parse_secure_endpoint(&https(world), tls).map_err(|err| err.to_string())?;
    endpoint
        .connect()
        .await
        .map_err(|err| taskstore_proto::endpoint::root_cause(&err))
}

async fn list(channel: Channel, token: Option<&str>) -> Result<usize, Status> {
    let token = match token {
        Some(token) => BearerToken::new(token).expect("token"),
        None => BearerToken::none(),
    };
    TaskStoreClient::new(InterceptedService::new(channel, token))
        .list_tasks(pb::ListTasksRequest::default())
        .await
        .map(|response| response.into_inner().tasks.len())
}

#[tokio::test]
async fn a_client_certificate_names_its_tenant_and_role() {
    let world = tls_world(vec![AuthMethod::Mtls]).await;
    let acme = channel(&world, &client_tls(Some("client-acme")))
        .await
        .expect("acme connects");
    let created = TaskStoreClient::new(acme.clone())
        .create_task(create(Some("t-1"), None, false))
        .await
        .expect("acme creates a task")
        .into_inner();
    assert_eq!(created.task_id, "t-1");
    assert_eq!(list(acme, None).await.expect("acme lists"), 1);

    // The fleet's certificate is a worker's: the execution API answers it,
    // the task-store API does not.
    let fleet = channel(&world, &client_tls(Some("worker-fleet")))
        .await
        .expect("the fleet connects");
    TaskExecutionClient::new(fleet.clone())
        .heartbeat(pb::HeartbeatRequest {
            consuming: None,
            worker_id: "fleet-1".into(),
            tools: vec!["echo".into()],
            slots: 1,
            busy: 0,
            stopping: false,
            descriptions: Vec::new(),
        })
        .await
        .expect("a worker certificate may report itself");
    let refused = list(fleet, None)
        .await
        .expect_err("a worker may not list tasks");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(refused.message().contains("worker role"), "{refused:?}");
}

#[tokio::test]
async fn certificates_are_the_only_way_in_when_mtls_is_the_only_method() {
    let world = tls_world(vec![AuthMethod::Mtls]).await;
    // No certificate, or one from another CA: the handshake fails, so no
    // call reaches a handler. (A TLS 1.3 client learns it only on its
    // first read, so the refusal may come at connect or at the call.)
    for (who, tls) in [
        ("no certificate", client_tls(None)),
        ("another CA's", client_tls(Some("client-foreign"))),
    ] {
        match channel(&world, &tls).await {
            Err(refused) => assert!(refused.contains("alert"), "{who}: {refused}"),
            Ok(connected) => {
                let refused = list(connected, None).await.expect_err(who);
                let cause = taskstore_proto::endpoint::root_cause(&refused);
                assert!(cause.contains("alert"), "{who}: {refused:?}");
            }
        }
    }
    // A certificate of our CA that names no taskstore caller.
    let noname = channel(&world, &client_tls(Some("client-noname")))
        .await
        .expect("the handshake succeeds");
    let refused = list(noname, None).await.expect_err("it names nobody");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert_eq!(refused.message(), "missing or invalid credentials");
}

#[tokio::test]
async fn tls_carries_api_keys_and_refuses_plaintext_and_unknown_servers() {
    let world = tls_world(vec![AuthMethod::ApiKeys, AuthMethod::Mtls]).await;
    let key = world.key("acme", Role::Client).await;

    // An API key over TLS, without a client certificate.
    let secure = channel(&world, &client_tls(None)).await.expect("connects");
    list(secure.clone(), Some(&key))
        .await
        .expect("a key over TLS works");
    let refused = list(secure, None)
        .await
        .expect_err("no key, no certificate");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");

    // Trusting only the public web roots, the test server is unknown.
    let unknown = channel(&world, &ClientTls::default())
        .await
        .expect_err("the server's CA is not trusted");
    assert!(unknown.contains("certificate"), "{unknown}");

    // Plaintext to the TLS port: no handler answers.
    if let Ok(plain) = tonic::transport::Endpoint::from_shared(format!("http://{}", world.addr))
        .expect("endpoint")
        .connect()
        .await
    {
        let refused = list(plain, Some(&key))
            .await
            .expect_err("plaintext to a TLS port");
        assert_ne!(refused.code(), Code::Ok);
        assert_ne!(refused.code(), Code::Unauthenticated, "{refused:?}");
    }
}

#[tokio::test]
async fn the_cli_speaks_mtls_with_its_flags() {
    let world = tls_world(vec![AuthMethod::Mtls]).await;
    let endpoint = https(&world);
    let cli = move |holder: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_taskstore"));
        command
            .args(["list", "--json", "--endpoint", &endpoint, "--ca-cert"])
            .arg(fixture("ca.pem"))
            .arg("--client-cert")
            .arg(fixture(&format!("{holder}.pem")))
            .arg("--client-key")
            .arg(fixture(&format!("{holder}.key")))
            .env_remove("TASKSTORE_TOKEN");
        command
    };
    let world_addr = world.addr;
    let (mut acme, mut noname) = (cli("client-acme"), cli("client-noname"));
    let acme = tokio::task::spawn_blocking(move || acme.output())
        .await
        .expect("join")
        .expect("run the cli");
    assert!(
        acme.status.success(),
        "{world_addr}: {}",
        String::from_utf8_lossy(&acme.stderr)
    );
    let noname = tokio::task::spawn_blocking(move || noname.output())
        .await
        .expect("join")
        .expect("run the cli");
    assert_eq!(noname.status.code(), Some(1), "{noname:?}");
    let stderr = String::from_utf8_lossy(&noname.stderr);
    assert!(stderr.contains("credentials"), "{stderr}");
}
