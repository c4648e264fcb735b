//! `omnigraph-host publish`: an NDJSON file into a NATS JetStream stream,
//! a fixed number of records per message, each acknowledged by JetStream
//! (the producer side of `consume`, for trying it out and for backfills).

use std::io::BufRead;
use std::path::PathBuf;

use omnigraph_host::nats::{Connection, REQUEST_TIMEOUT};

use super::common::{Failure, operational};

#[derive(clap::Args)]
pub(crate) struct PublishArgs {
    /// The NATS server, host:port.
    #[arg(long, env = "OMNIGRAPH_NATS", default_value = "127.0.0.1:4222")]
    nats: String,
    /// The subject to publish on (a stream must capture it; see --stream).
    #[arg(long)]
    subject: String,
    /// Create this stream on --subject if it does not exist.
    #[arg(long)]
    stream: Option<String>,
    /// Records per message.
    #[arg(long, default_value_t = 100)]
    records_per_message: usize,
    file: PathBuf,
}

pub(crate) async fn run(PublishArgs { nats, subject, stream, records_per_message, file }: PublishArgs) -> Result<(), Failure> {
    let mut connection = Connection::connect(&nats, REQUEST_TIMEOUT).await.map_err(operational)?;
    if let Some(stream) = &stream {
        connection.ensure_stream(stream, &[&subject]).await.map_err(operational)?;
    }
    let reader = std::io::BufReader::new(std::fs::File::open(&file).map_err(|e| operational(format!("{}: {e}", file.display())))?);
    // Message ids from the file's run: publishing the same file again
    // within the stream's duplicate window lands once.
    let run = ulid::Ulid::new();
    let (mut message, mut records, mut messages, mut last_seq) = (Vec::new(), 0, 0u64, None);
    let mut lines = reader.split(b'\n');
    loop {
        let line = lines.next().transpose().map_err(operational)?;
        if let Some(line) = &line
            && !line.iter().all(u8::is_ascii_whitespace)
        {
            message.extend_from_slice(line);
            message.push(b'\n');
            records += 1;
        }
        if (line.is_none() && !message.is_empty()) || records == records_per_message.max(1) {
            if message.len() > connection.max_payload {
                return Err(operational(format!(
                    "message {messages} is {} bytes, over the server's bound of {}: use fewer --records-per-message",
                    message.len(),
                    connection.max_payload
                )));
            }
            let seq = connection.publish_durably(&subject, &format!("{run}-{messages}"), &message).await.map_err(operational)?;
            messages += 1;
            message.clear();
            records = 0;
            last_seq = Some(seq);
        }
        if line.is_none() {
            match last_seq {
                Some(seq) => eprintln!("published {messages} messages; the last is stream sequence {seq}"),
                None => eprintln!("{}: no records", file.display()),
            }
            return Ok(());
        }
    }
}
