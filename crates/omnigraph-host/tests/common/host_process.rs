//! An `omnigraph-host serve` process listening on 127.0.0.1:0, for the
//! multi-host tests and the load-test bench (which includes this file).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A running host; killed (SIGKILL) when dropped.
pub struct HostProcess {
    pub child: Child,
    pub url: String,
}

impl HostProcess {
    /// Spawns `serve` (given `--listen 127.0.0.1:0`) and waits until it
    /// says where it listens.
    pub fn spawn(mut serve: Command) -> HostProcess {
        let mut child = serve.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines.next().expect("the host exited before listening").unwrap();
            if let Some(addr) = line.split(" on http://").nth(1) {
                break format!("http://{addr}");
            }
        };
        // Keep draining the host's log so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        HostProcess { child, url }
    }

    /// Sends `signal` to the host.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as libc::pid_t, signal) }, 0);
    }

    /// Stops the host as an operator would (SIGTERM): the loads and the
    /// maintenance step in flight finish, and it must exit cleanly. A
    /// SIGKILL instead can land in a maintenance step's table commits and
    /// leave a recovery record behind, which is a crash, not a stop.
    pub fn stop(mut self) {
        self.signal(libc::SIGTERM);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the host exited with {status} on SIGTERM");
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
