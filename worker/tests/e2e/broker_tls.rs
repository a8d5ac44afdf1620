//! TLS to RabbitMQ (`amqps://`): the service's relay and a worker reach
//! the broker through a TLS-terminating proxy (the broker here speaks
//! plain AMQP) that requires a client certificate of the test CA, as a
//! broker configured with `ssl_options.fail_if_no_peer_cert` does.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

use crate::common::{self, Env};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../services/taskstore/tests/fixtures")
        .join(name)
        .canonicalize()
        .expect("the test PKI is there")
        .display()
        .to_string()
}

/// A TLS proxy to `upstream` requiring client certificates; counts the
/// connections whose handshake succeeded.
struct TlsProxy {
    port: u16,
    verified: Arc<AtomicUsize>,
}

async fn tls_proxy(upstream: String) -> TlsProxy {
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(fixture("ca.pem")).expect("ca") {
        roots.add(cert.expect("ca cert")).expect("add ca");
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .expect("verifier");
    let chain = CertificateDer::pem_file_iter(fixture("server.pem"))
        .expect("server cert")
        .collect::<Result<Vec<_>, _>>()
        .expect("server chain");
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).expect("server key");
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .expect("server config");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let verified = Arc::new(AtomicUsize::new(0));
    let counted = verified.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (acceptor, upstream, counted) =
                (acceptor.clone(), upstream.clone(), counted.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                if let Ok(mut broker) = TcpStream::connect(&upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut broker).await;
                }
            });
        }
    });
    TlsProxy { port, verified }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_and_workers_reach_rabbitmq_over_tls_with_client_certificates() {
    let mut env = Env::new().await;
    let plain: lapin::uri::AMQPUri = common::amqp_url().parse().expect("AMQP_URL parses");
    let proxy = tls_proxy(format!("{}:{}", plain.authority.host, plain.authority.port)).await;
    let amqps = format!(
        "amqps://{}:{}@localhost:{}/{}",
        plain.authority.userinfo.username,
        plain.authority.userinfo.password,
        proxy.port,
        plain.vhost.replace('/', "%2f"),
    );
    let (ca, cert, key) = (
        fixture("ca.pem"),
        fixture("client-acme.pem"),
        fixture("client-acme.key"),
    );

    // Without a client certificate the broker is unreachable: the service
    // still starts (the relay retries), but nothing is verified.
    env.start_service(&["--amqp-url", &amqps, "--amqp-ca-cert", &ca]);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(proxy.verified.load(Ordering::SeqCst), 0);
    drop(env.service.take());

    env.start_service(&[
        "--amqp-url",
        &amqps,
        "--amqp-ca-cert",
        &ca,
        "--amqp-client-cert",
        &cert,
        "--amqp-client-key",
        &key,
    ]);
    let _worker = env.start_worker(
        "worker-amqps",
        "echo",
        None,
        &[
            "--amqp-url",
            &amqps,
            "--amqp-ca-cert",
            &ca,
            "--amqp-client-cert",
            &cert,
            "--amqp-client-key",
            &key,
        ],
    );
    env.wait_for_consumers("echo", 1).await;
    let created = Command::new(common::taskstore_binary())
        .args([
            "create",
            "--tool",
            "echo",
            "--arguments",
            r#"{"text":"amqps"}"#,
        ])
        .args(["--dispatch", "--json", "--endpoint", &env.endpoint])
        .output()
        .expect("run taskstore");
    assert!(created.status.success(), "{created:?}");
    let id = serde_json::from_slice::<Value>(&created.stdout).expect("json")["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    let result = Command::new(common::taskstore_binary())
        .args(["result", &id, "--wait", "--timeout", "30s", "--json"])
        .args(["--endpoint", &env.endpoint])
        .output()
        .expect("run taskstore");
    assert!(result.status.success(), "{result:?}");
    assert!(String::from_utf8_lossy(&result.stdout).contains("amqps"));
    assert!(
        proxy.verified.load(Ordering::SeqCst) >= 2,
        "the relay and the worker both came over TLS"
    );
    env.cleanup(&["echo"]).await;
}
