//! A PostgreSQL cluster of the test's own on a small disk: its data
//! directory on a size-limited tmpfs (mounted here, so the test runs as
//! root, as CI does), its WAL on the ordinary disk, on a port of its own.
//! It never touches the machine's shared cluster. Dropping it stops the
//! server by the PID it wrote, unmounts the tmpfs and removes everything.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct SmallDiskPostgres {
    root: PathBuf,
    mount: PathBuf,
    data: PathBuf,
    bin: PathBuf,
    port: u16,
}

fn run(program: &Path, args: &[&str]) {
    let status = Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|err| panic!("{}: {err}", program.display()));
    assert!(
        status.success(),
        "{} {args:?} failed: {status:?}",
        program.display()
    );
}

fn as_postgres(program: &Path, args: &[&str]) {
    let mut all = vec![
        "-u",
        "postgres",
        "--",
        program.to_str().expect("utf-8 path"),
    ];
    all.extend_from_slice(args);
    run(Path::new("runuser"), &all);
}

/// The binaries of the installed PostgreSQL (initdb, pg_ctl).
fn postgres_bin() -> PathBuf {
    let versions = std::fs::read_dir("/usr/lib/postgresql").expect("PostgreSQL is installed");
    versions
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("bin"))
        .find(|bin| bin.join("initdb").exists())
        .expect("initdb under /usr/lib/postgresql/*/bin")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

impl SmallDiskPostgres {
    /// A cluster whose data directory has `size_mib` MiB of disk.
    pub fn start(size_mib: u32) -> Self {
        let uid = Command::new("id").arg("-u").output().expect("id -u");
        assert_eq!(
            String::from_utf8_lossy(&uid.stdout).trim(),
            "0",
            "the full-disk test mounts a size-limited tmpfs for PostgreSQL's data: run it as root (CI does)"
        );
        let root = std::env::temp_dir().join(format!(
            "taskstore-small-disk-{}-{}",
            std::process::id(),
            free_port()
        ));
        let mount = root.join("disk");
        std::fs::create_dir_all(&mount).expect("mount point");
        std::fs::create_dir_all(root.join("wal")).expect("wal directory");
        run(
            Path::new("mount"),
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size_mib}m"),
                "tmpfs",
                mount.to_str().expect("path"),
            ],
        );
        let cluster = Self {
            data: mount.join("data"),
            mount,
            bin: postgres_bin(),
            port: free_port(),
            root,
        };
        run(
            Path::new("chown"),
            &[
                "-R",
                "postgres:postgres",
                cluster.root.to_str().expect("path"),
            ],
        );
        as_postgres(
            &cluster.bin.join("initdb"),
            &[
                "-D",
                cluster.data.to_str().expect("path"),
                "--waldir",
                cluster.root.join("wal/pg_wal").to_str().expect("path"),
                "-U",
                "postgres",
                "--auth",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        cluster.start_server();
        cluster
    }

    fn start_server(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=60",
            self.port,
            self.root.display()
        );
        as_postgres(
            &self.bin.join("pg_ctl"),
            &[
                "-D",
                self.data.to_str().expect("path"),
                "-l",
                self.root.join("postgres.log").to_str().expect("path"),
                "-o",
                &options,
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's PID, from the file it wrote.
    fn pid(&self) -> Option<i32> {
        let pid_file = std::fs::read_to_string(self.data.join("postmaster.pid")).ok()?;
        pid_file.lines().next()?.trim().parse().ok()
    }

    pub fn is_running(&self) -> bool {
        self.pid().is_some_and(|pid| {
            Command::new("kill")
                .args(["-0", &pid.to_string()])
                .status()
                .is_ok_and(|status| status.success())
        })
    }

    /// Starts the server again (after it stopped for want of space).
    pub fn restart(&self) {
        self.start_server();
    }

    fn filler(&self) -> PathBuf {
        self.mount.join("filler")
    }

    /// Takes every byte left on the data directory's disk.
    pub fn fill(&self) {
        let mut file = std::fs::File::create(self.filler()).expect("filler");
        for chunk in [1 << 20, 8 << 10, 512] {
            let zeros = vec![0u8; chunk];
            while file.write_all(&zeros).and_then(|()| file.flush()).is_ok() {}
        }
    }

    /// Gives the space back.
    pub fn free(&self) {
        std::fs::remove_file(self.filler()).expect("remove the filler");
    }

    /// The server's log, for a failure message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.join("postgres.log")).unwrap_or_default()
    }
}

impl Drop for SmallDiskPostgres {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            // Immediate shutdown (SIGQUIT), then make sure.
            let _ = Command::new("kill")
                .args(["-QUIT", &pid.to_string()])
                .status();
            for _ in 0..50 {
                if !self.is_running() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        let _ = Command::new("umount").arg(&self.mount).status();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
