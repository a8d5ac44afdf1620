//! A TCP proxy the test controls, to make the database "go down" and "come
//! back" for one store without disturbing the shared PostgreSQL that other
//! tests use.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct Proxy {
    addr: SocketAddr,
    up: Arc<AtomicBool>,
    /// Cancelled to cut every open connection; replaced on each outage.
    cut: Arc<std::sync::Mutex<CancellationToken>>,
}

impl Proxy {
    /// Forwards connections on an ephemeral local port to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let proxy = Proxy {
            addr: listener.local_addr().expect("proxy addr"),
            up: Arc::new(AtomicBool::new(true)),
            cut: Arc::new(std::sync::Mutex::new(CancellationToken::new())),
        };
        let accepting = proxy.clone();
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                if !accepting.up.load(Ordering::SeqCst) {
                    drop(client); // refused: the "database" is down
                    continue;
                }
                let cut = accepting.cut.lock().expect("proxy lock").clone();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let mut client = client;
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        () = cut.cancelled() => {}
                    }
                });
            }
        });
        proxy
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every open connection and refuses new ones.
    pub fn go_down(&self) {
        self.up.store(false, Ordering::SeqCst);
        let mut cut = self.cut.lock().expect("proxy lock");
        cut.cancel();
        *cut = CancellationToken::new();
    }

    pub fn come_back(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}
