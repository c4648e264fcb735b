//! A NATS client of the little the stream consumer (`consume`) needs: the
//! core protocol (`CONNECT`, `PUB`/`HPUB`, `SUB`, `MSG`/`HMSG`,
//! `PING`/`PONG`) over one TCP connection, and JetStream's JSON API on top
//! of request/reply: a stream and a durable pull consumer created if
//! missing, pulls bounded by messages and bytes, acks, and publishes that
//! JetStream acknowledges (the dead-letter stream).
//!
//! Why not `async-nats`: this is a few hundred lines over the documented
//! wire protocol, where the crate and its TLS, nkeys and websocket
//! dependencies would add their compile time to every fresh machine's
//! test run (issue 61 keeps it under an hour). No TLS and no auth: the
//! consumer talks to a NATS server beside it (127.0.0.1 in the tests).
//!
//! One task uses a connection at a time, request by request: it reads
//! frames only while it waits for an answer, and answers the server's
//! `PING`s then. The server's ping interval (2 minutes) is far above the
//! longest wait between two reads (one graph commit).

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The longest protocol line read (`MSG`/`HMSG`/`INFO`/`-ERR`); a longer
/// one is a broken peer, not a message.
pub const MAX_CONTROL_LINE_BYTES: usize = 64 * 1024;
/// How long a JetStream API request or a publish waits for its answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub enum NatsError {
    /// The connection failed or broke: reconnect.
    Io(std::io::Error),
    /// The peer broke the protocol, or the server sent `-ERR`.
    Protocol(String),
    /// JetStream's API answered with an error.
    Api { code: u64, description: String },
    /// Nothing listens on the subject (no stream, or JetStream is off).
    NoResponders(String),
    /// No answer within the wait.
    Timeout(String),
}

impl NatsError {
    /// Whether a new connection may succeed where this one failed.
    pub fn reconnect(&self) -> bool {
        matches!(self, NatsError::Io(_) | NatsError::Protocol(_) | NatsError::Timeout(_))
    }
}

impl std::fmt::Display for NatsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NatsError::Io(e) => write!(f, "NATS connection: {e}"),
            NatsError::Protocol(m) => write!(f, "NATS protocol: {m}"),
            NatsError::Api { code, description } => write!(f, "JetStream API error {code}: {description}"),
            NatsError::NoResponders(subject) => write!(f, "no responders on {subject} (is JetStream on?)"),
            NatsError::Timeout(what) => write!(f, "NATS: no answer to {what} in time"),
        }
    }
}

impl std::error::Error for NatsError {}

impl From<std::io::Error> for NatsError {
    fn from(e: std::io::Error) -> Self {
        NatsError::Io(e)
    }
}

/// A message as delivered: its subject, reply subject, header block
/// (`NATS/1.0 …` with the status line) and payload.
#[derive(Debug, Clone)]
pub struct Message {
    pub subject: String,
    pub reply: Option<String>,
    pub headers: Option<String>,
    pub payload: Vec<u8>,
}

impl Message {
    /// The status code of a status message (`NATS/1.0 408 …`), if any.
    pub fn status(&self) -> Option<u16> {
        let line = self.headers.as_deref()?.lines().next()?;
        line.strip_prefix("NATS/1.0")?.split_whitespace().next()?.parse().ok()
    }
}

/// Where a JetStream message sits in its stream, read from its ack
/// subject (`$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.…`, or
/// the form with a domain and an account hash before the stream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub stream: String,
    pub consumer: String,
    /// How many times the server has delivered it (1 the first time).
    pub delivered: u64,
    pub stream_seq: u64,
}

impl Delivery {
    pub fn parse(ack_subject: &str) -> Option<Delivery> {
        let tokens: Vec<&str> = ack_subject.split('.').collect();
        let at = match tokens.len() {
            9 => 2,
            n if n >= 11 => 4,
            _ => return None,
        };
        if tokens[..2] != ["$JS", "ACK"] {
            return None;
        }
        Some(Delivery {
            stream: tokens[at].to_owned(),
            consumer: tokens[at + 1].to_owned(),
            delivered: tokens[at + 2].parse().ok()?,
            stream_seq: tokens[at + 3].parse().ok()?,
        })
    }
}

/// One protocol frame from the server.
enum Frame {
    Message(Message),
    Ping,
    Pong,
    Other,
}

pub struct Connection {
    io: BufReader<TcpStream>,
    /// `_INBOX.<random>`: every reply comes to a subject under it.
    inbox: String,
    next_reply: u64,
    /// The server's bound on one message (its `INFO`).
    pub max_payload: usize,
}

impl Connection {
    /// Connects to `addr` (`host:port`), within `timeout`.
    pub async fn connect(addr: &str, timeout: Duration) -> Result<Connection, NatsError> {
        let addr = addr.trim_start_matches("nats://");
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| NatsError::Timeout(format!("connecting to {addr}")))??;
        stream.set_nodelay(true)?;
        let mut connection = Connection {
            io: BufReader::new(stream),
            inbox: format!("_INBOX.{}", ulid::Ulid::new()),
            next_reply: 0,
            max_payload: 1 << 20,
        };
        let info = tokio::time::timeout(timeout, connection.line())
            .await
            .map_err(|_| NatsError::Timeout("the server's INFO".into()))??;
        let info = info.strip_prefix("INFO ").ok_or_else(|| NatsError::Protocol(format!("expected INFO, got {info:?}")))?;
        let info: serde_json::Value = serde_json::from_str(info).map_err(|e| NatsError::Protocol(format!("INFO: {e}")))?;
        if info["headers"] != true {
            return Err(NatsError::Protocol("the server does not support headers (NATS 2.2 or later is needed)".into()));
        }
        connection.max_payload = info["max_payload"].as_u64().unwrap_or(1 << 20) as usize;
        let connect = serde_json::json!({
            "verbose": false, "pedantic": false, "headers": true, "no_responders": true,
            "protocol": 1, "lang": "rust-omnigraph", "version": env!("CARGO_PKG_VERSION"),
        });
        let hello = format!("CONNECT {connect}\r\nSUB {}.* 1\r\nPING\r\n", connection.inbox);
        connection.io.get_mut().write_all(hello.as_bytes()).await?;
        let deadline = Instant::now() + timeout;
        loop {
            let line = tokio::time::timeout_at(deadline, connection.line())
                .await
                .map_err(|_| NatsError::Timeout("the server's PONG".into()))??;
            match line.as_str() {
                "PONG" => return Ok(connection),
                "+OK" => {}
                l if l.starts_with("INFO ") => {}
                other => return Err(NatsError::Protocol(format!("connecting: {other}"))),
            }
        }
    }

    /// One protocol line without its `\r\n`.
    async fn line(&mut self) -> Result<String, NatsError> {
        let mut line = Vec::new();
        let n = (&mut self.io).take(MAX_CONTROL_LINE_BYTES as u64).read_until(b'\n', &mut line).await?;
        if n == 0 {
            return Err(NatsError::Io(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the server closed the connection")));
        }
        if !line.ends_with(b"\r\n") {
            return Err(NatsError::Protocol("a protocol line over the bound or cut short".into()));
        }
        line.truncate(line.len() - 2);
        String::from_utf8(line).map_err(|_| NatsError::Protocol("a protocol line that is not UTF-8".into()))
    }

    async fn frame(&mut self) -> Result<Frame, NatsError> {
        let line = self.line().await?;
        let mut parts = line.split_ascii_whitespace();
        let op = parts.next().unwrap_or_default();
        let args: Vec<&str> = parts.collect();
        let number = |s: &str| s.parse::<usize>().map_err(|_| NatsError::Protocol(format!("bad size in {line:?}")));
        let (subject, reply, header_len, total) = match (op, args.as_slice()) {
            ("MSG", [subject, _sid, n]) => (*subject, None, 0, number(n)?),
            ("MSG", [subject, _sid, reply, n]) => (*subject, Some(*reply), 0, number(n)?),
            ("HMSG", [subject, _sid, h, n]) => (*subject, None, number(h)?, number(n)?),
            ("HMSG", [subject, _sid, reply, h, n]) => (*subject, Some(*reply), number(h)?, number(n)?),
            ("PING", []) => return Ok(Frame::Ping),
            ("PONG", []) => return Ok(Frame::Pong),
            ("-ERR", _) => return Err(NatsError::Protocol(line.clone())),
            _ => return Ok(Frame::Other),
        };
        if total > self.max_payload.max(1 << 20) * 2 || header_len > total {
            return Err(NatsError::Protocol(format!("a message of {total} bytes over the server's bound")));
        }
        let mut body = vec![0; total + 2];
        self.io.read_exact(&mut body).await?;
        body.truncate(total);
        let payload = body.split_off(header_len);
        let headers = (header_len > 0).then(|| String::from_utf8_lossy(&body).into_owned());
        Ok(Frame::Message(Message { subject: subject.to_owned(), reply: reply.map(str::to_owned), headers, payload }))
    }

    /// The next message, answering `PING`s meanwhile; `None` at `deadline`.
    async fn next_message(&mut self, deadline: Instant) -> Result<Option<Message>, NatsError> {
        loop {
            match tokio::time::timeout_at(deadline, self.frame()).await {
                Err(_) => return Ok(None),
                Ok(Ok(Frame::Message(message))) => return Ok(Some(message)),
                Ok(Ok(Frame::Ping)) => self.io.get_mut().write_all(b"PONG\r\n").await?,
                Ok(Ok(Frame::Pong | Frame::Other)) => {}
                Ok(Err(e)) => return Err(e),
            }
        }
    }

    fn reply_subject(&mut self) -> String {
        self.next_reply += 1;
        format!("{}.{}", self.inbox, self.next_reply)
    }

    /// Publishes `payload` (with `headers`, `Name: value` lines) to `subject`.
    pub async fn publish(&mut self, subject: &str, reply: Option<&str>, headers: &[(&str, &str)], payload: &[u8]) -> Result<(), NatsError> {
        let reply = reply.map(|r| format!(" {r}")).unwrap_or_default();
        let mut frame = Vec::with_capacity(payload.len() + 128);
        if headers.is_empty() {
            frame.extend_from_slice(format!("PUB {subject}{reply} {}\r\n", payload.len()).as_bytes());
        } else {
            let mut block = String::from("NATS/1.0\r\n");
            for (name, value) in headers {
                block.push_str(&format!("{name}: {value}\r\n"));
            }
            block.push_str("\r\n");
            frame.extend_from_slice(format!("HPUB {subject}{reply} {} {}\r\n", block.len(), block.len() + payload.len()).as_bytes());
            frame.extend_from_slice(block.as_bytes());
        }
        frame.extend_from_slice(payload);
        frame.extend_from_slice(b"\r\n");
        self.io.get_mut().write_all(&frame).await?;
        Ok(())
    }

    /// Sends a request and waits for its answer (answers to earlier,
    /// abandoned requests are dropped).
    pub async fn request(&mut self, subject: &str, headers: &[(&str, &str)], payload: &[u8]) -> Result<Message, NatsError> {
        let reply = self.reply_subject();
        self.publish(subject, Some(&reply), headers, payload).await?;
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        loop {
            let Some(message) = self.next_message(deadline).await? else { return Err(NatsError::Timeout(subject.to_owned())) };
            if message.subject != reply {
                continue;
            }
            if message.status() == Some(503) {
                return Err(NatsError::NoResponders(subject.to_owned()));
            }
            return Ok(message);
        }
    }

    /// A JetStream API call: its JSON answer, or its error.
    pub async fn api(&mut self, subject: &str, body: Option<&serde_json::Value>) -> Result<serde_json::Value, NatsError> {
        let payload = body.map(|b| b.to_string()).unwrap_or_default();
        let answer = self.request(subject, &[], payload.as_bytes()).await?;
        let answer: serde_json::Value =
            serde_json::from_slice(&answer.payload).map_err(|e| NatsError::Protocol(format!("{subject}: {e}")))?;
        match api_error(&answer) {
            Some(error) => Err(error),
            None => Ok(answer),
        }
    }

    /// Creates stream `name` on `subjects` (file storage) unless it exists.
    pub async fn ensure_stream(&mut self, name: &str, subjects: &[&str]) -> Result<(), NatsError> {
        match self.api(&format!("$JS.API.STREAM.INFO.{name}"), None).await {
            Ok(_) => Ok(()),
            Err(NatsError::Api { code: 10059, .. }) => {
                let config = serde_json::json!({"name": name, "subjects": subjects, "storage": "file"});
                self.api(&format!("$JS.API.STREAM.CREATE.{name}"), Some(&config)).await.map(drop)
            }
            Err(e) => Err(e),
        }
    }

    /// Creates the durable pull consumer `durable` on `stream` unless it
    /// exists: explicit acks, redelivery after `ack_wait`, at most
    /// `max_ack_pending` messages delivered and not acked.
    pub async fn ensure_pull_consumer(&mut self, stream: &str, durable: &str, ack_wait: Duration, max_ack_pending: u64) -> Result<(), NatsError> {
        let config = serde_json::json!({
            "stream_name": stream,
            "config": {
                "durable_name": durable, "ack_policy": "explicit", "deliver_policy": "all",
                "ack_wait": ack_wait.as_nanos() as u64, "max_ack_pending": max_ack_pending,
            },
        });
        match self.api(&format!("$JS.API.CONSUMER.INFO.{stream}.{durable}"), None).await {
            Ok(_) => Ok(()),
            Err(NatsError::Api { code: 10014, .. }) => {
                self.api(&format!("$JS.API.CONSUMER.CREATE.{stream}.{durable}"), Some(&config)).await.map(drop)
            }
            Err(e) => Err(e),
        }
    }

    /// The stream sequence every message at or below which the consumer
    /// has acked (its ack floor).
    pub async fn ack_floor(&mut self, stream: &str, durable: &str) -> Result<u64, NatsError> {
        let info = self.api(&format!("$JS.API.CONSUMER.INFO.{stream}.{durable}"), None).await?;
        Ok(info["ack_floor"]["stream_seq"].as_u64().unwrap_or(0))
    }

    /// Pulls up to `batch` messages of at most `max_bytes` together,
    /// waiting until `expires` for the first ones. Returns what arrived (a
    /// pull ends at its count, its byte bound, or its expiry).
    pub async fn fetch(&mut self, stream: &str, durable: &str, batch: usize, max_bytes: usize, expires: Duration) -> Result<Vec<Message>, NatsError> {
        let reply = self.reply_subject();
        let expires = expires.max(Duration::from_millis(10));
        let pull = serde_json::json!({"batch": batch, "max_bytes": max_bytes, "expires": expires.as_nanos() as u64});
        self.publish(&format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"), Some(&reply), &[], pull.to_string().as_bytes())
            .await?;
        // The server ends the pull itself at `expires`; this is the bound
        // if its status message never comes.
        let deadline = Instant::now() + expires + REQUEST_TIMEOUT;
        let mut out = Vec::new();
        while out.len() < batch {
            let Some(message) = self.next_message(deadline).await? else { return Err(NatsError::Timeout("a pull".into())) };
            if message.reply.as_deref().is_some_and(|r| r.starts_with("$JS.ACK.")) {
                out.push(message);
            } else if message.subject == reply {
                match message.status() {
                    // 404 no messages, 408 expired, 409 byte bound reached
                    // or the pull replaced: this pull is over.
                    Some(404 | 408 | 409) => break,
                    Some(100) => {}
                    status => return Err(NatsError::Protocol(format!("a pull answered {status:?}: {:?}", message.headers))),
                }
            }
        }
        Ok(out)
    }

    /// Acknowledges a delivered message: JetStream will not deliver it again.
    pub async fn ack(&mut self, message: &Message) -> Result<(), NatsError> {
        match &message.reply {
            Some(reply) => self.publish(reply, None, &[], b"+ACK").await,
            None => Ok(()),
        }
    }

    /// Publishes into a stream and waits for JetStream's acknowledgement;
    /// `msg_id` makes a repeated publish (within the stream's duplicate
    /// window) land once. Returns the message's stream sequence.
    pub async fn publish_durably(&mut self, subject: &str, msg_id: &str, payload: &[u8]) -> Result<u64, NatsError> {
        let answer = self.request(subject, &[("Nats-Msg-Id", msg_id)], payload).await?;
        let ack: serde_json::Value =
            serde_json::from_slice(&answer.payload).map_err(|e| NatsError::Protocol(format!("publish ack: {e}")))?;
        if let Some(error) = api_error(&ack) {
            return Err(error);
        }
        ack["seq"].as_u64().ok_or_else(|| NatsError::Protocol(format!("publish ack without seq: {ack}")))
    }

    /// Waits until the server has processed everything sent before (a
    /// `PING`'s `PONG`): acks sent before it have arrived. A message that
    /// arrives meanwhile is dropped unacked (JetStream delivers it again).
    pub async fn flush(&mut self) -> Result<(), NatsError> {
        self.io.get_mut().write_all(b"PING\r\n").await?;
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, self.frame()).await {
                Err(_) => return Err(NatsError::Timeout("a flush".into())),
                Ok(frame) => match frame? {
                    Frame::Pong => return Ok(()),
                    Frame::Ping => self.io.get_mut().write_all(b"PONG\r\n").await?,
                    Frame::Message(_) | Frame::Other => {}
                },
            }
        }
    }
}

/// JetStream's `{"error": {"err_code", "code", "description"}}`, if the answer is one.
fn api_error(answer: &serde_json::Value) -> Option<NatsError> {
    let error = answer.get("error")?;
    Some(NatsError::Api {
        code: error["err_code"].as_u64().or_else(|| error["code"].as_u64()).unwrap_or(0),
        description: error["description"].as_str().unwrap_or_default().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_subjects_of_both_forms_name_the_stream_sequence() {
        let v1 = Delivery::parse("$JS.ACK.IN.c1.2.17.5.1796672749424090448.0").unwrap();
        assert_eq!(v1, Delivery { stream: "IN".into(), consumer: "c1".into(), delivered: 2, stream_seq: 17 });
        let v2 = Delivery::parse("$JS.ACK.hub.ACCHASH.IN.c1.1.42.9.1796672749424090448.3.abc").unwrap();
        assert_eq!((v2.stream.as_str(), v2.stream_seq), ("IN", 42));
        assert!(Delivery::parse("$JS.ACK.IN.c1.x.17.5.1.0").is_none());
        assert!(Delivery::parse("_INBOX.x.1").is_none());
    }

    #[test]
    fn status_messages_are_read_from_their_header_block() {
        let status = Message { subject: "s".into(), reply: None, headers: Some("NATS/1.0 408 Request Timeout\r\n\r\n".into()), payload: vec![] };
        assert_eq!(status.status(), Some(408));
        let plain = Message { headers: None, ..status };
        assert_eq!(plain.status(), None);
    }
}
