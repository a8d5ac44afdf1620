//! A worker process of the conformance fleet, as the suite handles it:
//! signals, a kill, its exit, and the last lines it wrote.

use std::collections::VecDeque;
use std::process::{Child, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::Language;

/// A worker process: killed (SIGKILL) and reaped when dropped. Its stderr
/// is echoed with its id, and the last lines are kept for failure messages.
pub struct WorkerProcess {
    pub id: String,
    pub language: Language,
    pub(crate) child: Child,
    pub(crate) tail: Arc<Mutex<VecDeque<String>>>,
    pub(crate) exit: Option<ExitStatus>,
}

impl WorkerProcess {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.pid()).expect("pid"));
        kill(pid, signal).unwrap_or_else(|err| panic!("{signal} to {}: {err}", self.id));
    }

    /// SIGKILL, as a crash would; reaped.
    pub fn kill_9(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            self.exit = self.child.wait().ok();
        }
    }

    /// How it ended, once it has.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().expect("try_wait");
        }
        self.exit
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} did not exit within {timeout:?}; its last lines:\n{}",
                self.id,
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its last lines on stderr.
    pub fn tail(&self) -> String {
        let lines = self.tail.lock().map(|t| t.clone()).unwrap_or_default();
        lines.into_iter().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill_9();
    }
}
