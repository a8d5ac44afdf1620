//! A RabbitMQ cluster of the test's own: three nodes on this machine with
//! their own node names, ports, configuration and data directories,
//! clustered. It never touches the shared broker (rabbit@localhost, 5672).
//! Dropping it stops each node it started, by name and then by the PID it
//! wrote, and removes its directories.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub struct Node {
    pub name: String,
    pub port: u16,
    dir: PathBuf,
}

pub struct Cluster {
    pub nodes: Vec<Node>,
    root: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

fn ctl(node: &str, args: &[&str]) -> std::process::Output {
    Command::new("rabbitmqctl")
        .args(["-n", node])
        .args(args)
        .output()
        .expect("rabbitmqctl")
}

fn ctl_ok(node: &str, args: &[&str]) {
    let output = ctl(node, args);
    assert!(
        output.status.success(),
        "rabbitmqctl -n {node} {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

impl Node {
    fn start(root: &Path, tag: &str) -> Self {
        let name = format!("{tag}@localhost");
        let port = free_port();
        let dir = root.join(tag);
        std::fs::create_dir_all(dir.join("log")).expect("node directory");
        std::fs::write(
            dir.join("rabbitmq.conf"),
            format!("listeners.tcp.local = 127.0.0.1:{port}\nloopback_users = none\n"),
        )
        .expect("node configuration");
        // No plugins (the shared node's management port is taken) and no
        // shared environment file (it names the shared node).
        std::fs::write(dir.join("enabled_plugins"), "[].\n").expect("plugins file");
        std::fs::write(dir.join("rabbitmq-env.conf"), "").expect("env file");
        // Run as root, rabbitmq-server runs the node as the rabbitmq user.
        let owned = Command::new("chown")
            .args(["-R", "rabbitmq:rabbitmq"])
            .arg(root)
            .status()
            .expect("chown");
        assert!(owned.success(), "chown the node's directory");
        let node = Self { name, port, dir };
        let status = Command::new("rabbitmq-server")
            .arg("-detached")
            .env("RABBITMQ_NODENAME", &node.name)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", node.port.to_string())
            .env("RABBITMQ_DIST_PORT", free_port().to_string())
            .env("RABBITMQ_CONFIG_FILE", node.dir.join("rabbitmq.conf"))
            .env("RABBITMQ_CONF_ENV_FILE", node.dir.join("rabbitmq-env.conf"))
            .env(
                "RABBITMQ_ENABLED_PLUGINS_FILE",
                node.dir.join("enabled_plugins"),
            )
            .env("RABBITMQ_MNESIA_BASE", node.dir.join("data"))
            .env("RABBITMQ_LOG_BASE", node.dir.join("log"))
            .env("RABBITMQ_PID_FILE", node.pid_file())
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            .status()
            .expect("rabbitmq-server");
        assert!(
            status.success(),
            "rabbitmq-server -detached for {}",
            node.name
        );
        // -detached returns before the node is there to be asked, and a
        // booting node leaves epmd for a moment (its distribution restarts).
        node.await_startup();
        node
    }

    fn await_startup(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while !ctl(&self.name, &["await_startup", "--timeout", "10"])
            .status
            .success()
        {
            assert!(
                std::time::Instant::now() < deadline,
                "{} did not start; its log: {}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn log(&self) -> String {
        let mut text = String::new();
        for entry in std::fs::read_dir(self.dir.join("log"))
            .into_iter()
            .flatten()
            .flatten()
        {
            text.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
        text.chars()
            .rev()
            .take(3000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect()
    }

    fn pid_file(&self) -> PathBuf {
        self.dir.join("node.pid")
    }

    pub fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    /// Halts the node (its Erlang VM exits at once), as a lost machine.
    pub fn halt(&self) {
        let _ = ctl(&self.name, &["eval", "erlang:halt()."]);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{} still listens after halt", self.name);
    }

    fn stop(&self) {
        let _ = ctl(&self.name, &["stop"]);
        if let Some(pid) = std::fs::read_to_string(self.pid_file())
            .ok()
            .and_then(|pid| pid.trim().parse::<u32>().ok())
        {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

impl Cluster {
    /// Three nodes, clustered: the second and third join the first.
    pub fn start() -> Self {
        let run = format!("ts{}", free_port());
        let root = std::env::temp_dir().join(format!("taskstore-cluster-{run}"));
        let mut cluster = Self {
            nodes: Vec::new(),
            root,
        };
        for letter in ["a", "b", "c"] {
            let node = Node::start(&cluster.root, &format!("{run}{letter}"));
            cluster.nodes.push(node);
        }
        let first = cluster.nodes[0].name.clone();
        for node in &cluster.nodes[1..] {
            ctl_ok(&node.name, &["stop_app"]);
            ctl_ok(&node.name, &["join_cluster", &first]);
            ctl_ok(&node.name, &["start_app"]);
            node.await_startup();
        }
        cluster
    }

    /// Every node's URL, comma-separated: what `--amqp-url` takes.
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(Node::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The node a connection named `name` is on, asked of `via`.
    pub fn node_of_connection(&self, via: &Node, name: &str) -> Option<String> {
        let listed: serde_json::Value = serde_json::from_str(&self.connections(via)).ok()?;
        listed.as_array()?.iter().find_map(|connection| {
            let properties = connection.get("client_properties")?.to_string();
            if !properties.contains(&format!("\"{name}\"")) {
                return None;
            }
            // An Erlang pid names its node (<ts1a@localhost.1695.1234.0>),
            // unless it is the asked node's own (<0.1234.0>).
            let pid = connection.get("pid")?.as_str()?;
            let node = pid.trim_start_matches('<').split('.').next()?;
            Some(if node.contains('@') {
                node.to_owned()
            } else {
                via.name.clone()
            })
        })
    }

    /// Every connection of the cluster, asked of `via`, as JSON: each
    /// one's pid (which names its node) and client properties.
    pub fn connections(&self, via: &Node) -> String {
        let output = ctl(
            &via.name,
            &[
                "list_connections",
                "-q",
                "--formatter",
                "json",
                "pid",
                "client_properties",
            ],
        );
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::env::var_os("KEEP_CLUSTER").is_some() {
            return;
        }
        for node in &self.nodes {
            node.stop();
        }
        if std::env::var_os("KEEP_CLUSTER").is_none() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}
