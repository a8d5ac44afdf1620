//! A child process of a test, killed (and reaped) when dropped.

use std::process::{Child, Command};
use std::time::Duration;

/// A child process killed (and reaped) when dropped.
pub struct Process {
    pub child: Child,
    pub name: String,
}

impl Process {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, as a crash would.
    pub fn kill_9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {signal} {}", self.name);
    }

    /// Waits for the process to exit by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} did not exit in time",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
