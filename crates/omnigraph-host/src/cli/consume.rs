//! `omnigraph-host consume`: a NATS JetStream stream committed into a
//! graph exactly once, what the rule book refuses published to a
//! dead-letter stream with its report (docs/rulebook.md, "The stream
//! consumer", has the argument).
//!
//! The loop: pull messages through a durable pull consumer until a batch
//! is full (the graph's rows and bytes bounds) or has lingered. Read the
//! branch's head, then the newest commit this consumer made: its batch key
//! holds the stream sequences done so far. Ack what is done, load the rest
//! as one commit based on that head (`unchanged_since`) whose key is the
//! new done set, and ack after the commit is durable. A refusal that names
//! records sends those to the dead-letter stream and loads the rest; one
//! that names none splits the batch in two.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use std::sync::Arc;

use omnigraph_host::LoadRequest;
use omnigraph_host::error::{RECORD_BOUND_CODES, SIZE_BOUND_CODES};
use omnigraph_host::http::AppState;
use omnigraph_host::nats::{Connection, Delivery, Message, NatsError};
use omnigraph_host::split::table_of;
use omnigraph_validate_wasm::Mode;
use tokio::time::Instant;

use super::common::{Failure, ModeArg, operational};
use super::target::{BatchRefused, Target, TargetArgs, refused_lines};

/// Messages asked for per pull.
const PULL_MESSAGES: usize = 512;
/// A pull's wait while no batch is open.
const IDLE_PULL_WAIT: Duration = Duration::from_secs(1);
/// Ranges of done sequences a batch key holds above its floor; a batch
/// that would need more waits for the gaps below it to close.
pub(crate) const MAX_DONE_RANGES: usize = 64;
/// Retries of an unavailable graph or NATS server back off up to this.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

#[derive(clap::Args)]
pub(crate) struct ConsumeArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[command(flatten)]
    stream: StreamArgs,
    /// Stop after the stream has had nothing new for this long (tests,
    /// one-off backfills); without it, consume runs until killed.
    #[arg(long)]
    exit_when_idle_ms: Option<u64>,
}

/// What a consumer reads and how it batches: `consume`'s options, and
/// those of a `serve --consume` (its defaults but the server and stream).
#[derive(clap::Args, Clone)]
pub(crate) struct StreamArgs {
    /// The NATS server, host:port.
    #[arg(long, env = "OMNIGRAPH_NATS", default_value = "127.0.0.1:4222")]
    nats: String,
    /// The JetStream stream to consume.
    #[arg(long)]
    stream: String,
    /// Create the stream on these subjects if it does not exist.
    #[arg(long, value_delimiter = ',')]
    subjects: Vec<String>,
    /// The durable pull consumer's name (one per graph branch the stream feeds).
    #[arg(long, default_value = "omnigraph")]
    durable: String,
    /// Where refused records go; a stream `<stream>_DEAD_LETTER` on it is
    /// created if none captures it.
    #[arg(long)]
    dead_letter_subject: Option<String>,
    #[arg(long, default_value = "main")]
    branch: String,
    /// `merge` or `append` (an overwrite has no meaning for a stream).
    #[arg(long, value_enum, default_value = "merge")]
    mode: ModeArg,
    #[arg(long, default_value = "consume")]
    actor: String,
    /// How long a batch waits for more messages after its first.
    #[arg(long, default_value_t = 100)]
    linger_ms: u64,
    /// Records of any one type per batch (default and most: the graph's
    /// rows-per-table bound).
    #[arg(long)]
    batch_rows: Option<u64>,
    /// Bytes per batch (default and most: the graph's body bound); also
    /// the most one pull brings in.
    #[arg(long)]
    batch_bytes: Option<u64>,
    /// JetStream delivers a message again if it is not acked this long
    /// after delivery (longer than a commit takes).
    #[arg(long, default_value_t = 60_000)]
    ack_wait_ms: u64,
}

/// `StreamArgs` alone, to read a `serve --consume` with `consume`'s defaults.
#[derive(clap::Parser)]
struct StreamOnly {
    #[command(flatten)]
    stream: StreamArgs,
}

impl StreamArgs {
    /// `consume`'s settings for `stream` on the NATS server `nats`.
    pub(crate) fn defaults(nats: &str, stream: &str) -> StreamArgs {
        <StreamOnly as clap::Parser>::parse_from(["consume", "--nats", nats, "--stream", stream]).stream
    }
}

/// Stream sequences a consumer is done with (committed, or dead-lettered
/// and acked): every one up to `floor`, and `ranges` above it (sorted,
/// disjoint, not touching each other or the floor).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Done {
    floor: u64,
    ranges: Vec<(u64, u64)>,
}

impl Done {
    pub(crate) fn contains(&self, seq: u64) -> bool {
        seq <= self.floor || self.ranges.iter().any(|&(lo, hi)| lo <= seq && seq <= hi)
    }

    pub(crate) fn insert(&mut self, seq: u64) {
        self.ranges.push((seq, seq));
        self.normalize();
    }

    pub(crate) fn raise_floor(&mut self, floor: u64) {
        self.floor = self.floor.max(floor);
        self.normalize();
    }

    fn normalize(&mut self) {
        self.ranges.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(self.ranges.len());
        for (lo, hi) in self.ranges.drain(..) {
            if lo <= self.floor + 1 {
                self.floor = self.floor.max(hi);
            } else if let Some(last) = out.last_mut().filter(|last| lo <= last.1 + 1) {
                last.1 = last.1.max(hi);
            } else {
                out.push((lo, hi));
            }
        }
        self.ranges = out;
    }

    /// `floor` or `floor+lo-hi,seq,…`.
    pub(crate) fn encode(&self) -> String {
        if self.ranges.is_empty() {
            return self.floor.to_string();
        }
        format!("{}+{}", self.floor, encode_ranges(&self.ranges))
    }

    pub(crate) fn parse(text: &str) -> Option<Done> {
        let (floor, ranges) = text.split_once('+').unwrap_or((text, ""));
        let mut done = Done { floor: floor.parse().ok()?, ranges: parse_ranges(ranges)? };
        done.normalize();
        Some(done)
    }
}

/// `lo-hi,seq,…` of sorted ranges.
fn encode_ranges(ranges: &[(u64, u64)]) -> String {
    let parts: Vec<String> =
        ranges.iter().map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") }).collect();
    parts.join(",")
}

fn parse_ranges(text: &str) -> Option<Vec<(u64, u64)>> {
    if text.is_empty() {
        return Some(Vec::new());
    }
    text.split(',')
        .map(|part| {
            let (lo, hi) = part.split_once('-').unwrap_or((part, part));
            let (lo, hi) = (lo.parse().ok()?, hi.parse().ok()?);
            (lo <= hi).then_some((lo, hi))
        })
        .collect()
}

/// Sorted, merged ranges of `seqs`.
fn ranges_of(seqs: impl IntoIterator<Item = u64>) -> Vec<(u64, u64)> {
    let seqs: BTreeSet<u64> = seqs.into_iter().collect();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for seq in seqs {
        match out.last_mut() {
            Some(last) if last.1 + 1 == seq => last.1 = seq,
            _ => out.push((seq, seq)),
        }
    }
    out
}

/// The batch keys of one consumer: `jetstream/<stream>/<durable>/` then
/// the sequences this commit holds, then the done set after it (stream
/// and consumer names cannot hold `/`).
pub(crate) struct KeyFormat {
    prefix: String,
}

impl KeyFormat {
    pub(crate) fn new(stream: &str, durable: &str) -> KeyFormat {
        KeyFormat { prefix: format!("jetstream/{stream}/{durable}/") }
    }

    pub(crate) fn key(&self, held: &[(u64, u64)], done: &Done) -> String {
        format!("{}{}/{}", self.prefix, encode_ranges(held), done.encode())
    }

    /// The done set a key of this consumer records.
    pub(crate) fn done_of(&self, key: &str) -> Option<Done> {
        let (_held, done) = key.strip_prefix(&self.prefix)?.split_once('/')?;
        Done::parse(done)
    }
}

/// A delivered message: its stream sequence, its records (the byte
/// ranges of its non-empty lines) and their rows per table.
struct Pulled {
    seq: u64,
    message: Message,
    /// Its records: the non-blank lines, as byte ranges of the payload.
    records: Vec<std::ops::Range<usize>>,
    /// Each record's line in the message (from 1, blank lines counted):
    /// where a dead letter says the record was.
    record_lines: Vec<usize>,
    rows: HashMap<String, usize>,
}

impl Pulled {
    fn new(message: Message) -> Option<Pulled> {
        let seq = Delivery::parse(message.reply.as_deref()?)?.stream_seq;
        let mut records = Vec::new();
        let mut record_lines = Vec::new();
        let mut start = 0;
        let lines = message.payload.iter().enumerate().chain([(message.payload.len(), &b'\n')]).filter(|(_, byte)| **byte == b'\n');
        for (number, (at, _)) in lines.enumerate() {
            let line = &message.payload[start..at];
            if line.iter().any(|b| !b.is_ascii_whitespace()) {
                records.push(start..at);
                record_lines.push(number + 1);
            }
            start = at + 1;
        }
        let mut rows: HashMap<String, usize> = HashMap::new();
        for range in &records {
            if let Some(table) = table_of(&message.payload[range.clone()]) {
                *rows.entry(table).or_default() += 1;
            }
        }
        Some(Pulled { seq, message, records, record_lines, rows })
    }

    fn bytes(&self) -> usize {
        self.records.iter().map(|r| r.len() + 1).sum()
    }
}

/// The NATS connection, made again (with backoff) whenever it broke.
struct Link {
    addr: String,
    stream: String,
    durable: String,
    subjects: Vec<String>,
    dead_letter_subject: String,
    ack_wait: Duration,
    max_ack_pending: u64,
    connection: Option<Connection>,
    /// Counts broken connections in a server's `/metrics`.
    server: Option<Arc<AppState>>,
}

impl Link {
    /// A working connection with the streams and the consumer in place.
    async fn get(&mut self) -> &mut Connection {
        let mut backoff = FIRST_BACKOFF;
        while self.connection.is_none() {
            match self.connect().await {
                Ok(connection) => self.connection = Some(connection),
                Err(e) => {
                    eprintln!("consume: {e}; retrying in {} ms", backoff.as_millis());
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        self.connection.as_mut().expect("connected")
    }

    async fn connect(&self) -> Result<Connection, NatsError> {
        let mut connection = Connection::connect(&self.addr, omnigraph_host::nats::REQUEST_TIMEOUT).await?;
        if !self.subjects.is_empty() {
            let subjects: Vec<&str> = self.subjects.iter().map(String::as_str).collect();
            connection.ensure_stream(&self.stream, &subjects).await?;
        }
        connection.ensure_stream(&format!("{}_DEAD_LETTER", self.stream), &[&self.dead_letter_subject]).await?;
        connection.ensure_pull_consumer(&self.stream, &self.durable, self.ack_wait, self.max_ack_pending).await?;
        Ok(connection)
    }

    /// Drops a connection an error may have left mid-frame or broken.
    fn failed(&mut self, e: &NatsError) {
        eprintln!("consume: {e}");
        if e.reconnect() && self.connection.take().is_some()
            && let Some(server) = &self.server
        {
            server.metrics.nats_disconnect(&self.stream);
        }
    }
}

/// What one consumer process is doing.
struct Consumer {
    target: Target,
    link: Link,
    keys: KeyFormat,
    branch: String,
    mode: Mode,
    actor: String,
    max_rows: usize,
    max_bytes: usize,
    linger: Duration,
    /// Messages pulled past the last batch's bounds: the next batch's first.
    carried: Vec<Pulled>,
    server: Option<Arc<AppState>>,
}

pub(crate) async fn run(ConsumeArgs { target, stream, exit_when_idle_ms }: ConsumeArgs) -> Result<(), Failure> {
    let target = target.open().await?;
    consume(target, stream, exit_when_idle_ms.map(Duration::from_millis), None).await
}

/// Consumes a stream into `target` until `idle_exit` passes with nothing
/// new (or for ever); `server` counts what it does in its `/metrics`.
pub(crate) async fn consume(target: Target, args: StreamArgs, idle_exit: Option<Duration>, server: Option<Arc<AppState>>) -> Result<(), Failure> {
    let mode: Mode = args.mode.into();
    if mode == Mode::Overwrite {
        return Err(operational("consume: --mode overwrite replaces whole types per batch, which a stream cannot mean; use merge or append"));
    }
    let bounds = target.limits().await?;
    let max_rows = args.batch_rows.unwrap_or(bounds.max_table_rows).clamp(1, bounds.max_table_rows.max(1)) as usize;
    let max_bytes = args.batch_bytes.unwrap_or(bounds.max_batch_bytes).clamp(1, bounds.max_batch_bytes) as usize;
    let link = Link {
        addr: args.nats,
        dead_letter_subject: args.dead_letter_subject.unwrap_or_else(|| format!("omnigraph.dead-letter.{}", args.stream)),
        stream: args.stream.clone(),
        durable: args.durable.clone(),
        subjects: args.subjects,
        ack_wait: Duration::from_millis(args.ack_wait_ms),
        // In flight and not acked: two batches' worth of single-record
        // messages, so a batch can fill while the one before commits.
        max_ack_pending: 2 * max_rows as u64,
        connection: None,
        server: server.clone(),
    };
    let mut consumer = Consumer {
        target,
        link,
        keys: KeyFormat::new(&args.stream, &args.durable),
        branch: args.branch,
        mode,
        actor: args.actor,
        max_rows,
        max_bytes,
        linger: Duration::from_millis(args.linger_ms),
        carried: Vec::new(),
        server: server.clone(),
    };
    // A graph no server maintains is maintained beside the consumer, as a
    // server maintains its own: loads only append, and fragments must not
    // pile up over a stream's life.
    let maintenance = match (&consumer.target, &server) {
        (Target::Local(graph), None) => Some(Maintenance::start(graph.clone())),
        _ => None,
    };
    let consumed = consumer.run(idle_exit).await;
    if let Some(maintenance) = maintenance {
        maintenance.stop().await;
    }
    consumed
}

/// Maintenance steps on a task of their own, every `MAINTENANCE_INTERVAL`,
/// for the loads the consumer committed (`Graph::maintain_if_due`).
struct Maintenance {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Maintenance {
    fn start(graph: Arc<omnigraph_host::Graph>) -> Maintenance {
        let (stop, mut stopping) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(omnigraph_host::limits::MAINTENANCE_INTERVAL) => {}
                    _ = stopping.changed() => return,
                }
                if let Err(e) = graph.maintain_if_due(|| *stopping.borrow(), |_| {}).await {
                    eprintln!("consume: maintenance stopped ({e}); the next round continues");
                }
            }
        });
        Maintenance { stop, task }
    }

    /// Stops between two steps, never inside one.
    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

impl Consumer {
    /// Batches and commits until `idle_exit` passes with nothing new.
    async fn run(&mut self, idle_exit: Option<Duration>) -> Result<(), Failure> {
        let mut last_message = Instant::now();
        loop {
            let batch = self.gather(idle_exit.map_or(IDLE_PULL_WAIT, |idle| idle.min(IDLE_PULL_WAIT))).await;
            if batch.is_empty() {
                if idle_exit.is_some_and(|idle| last_message.elapsed() >= idle) {
                    return Ok(());
                }
                continue;
            }
            self.commit_batch(batch).await?;
            last_message = Instant::now();
        }
    }
}

impl Consumer {
    /// Pulls until a batch is full or has lingered since its first
    /// message; empty if nothing came within `idle_wait`.
    async fn gather(&mut self, idle_wait: Duration) -> Vec<Pulled> {
        let mut batch: Vec<Pulled> = Vec::new();
        let mut rows: HashMap<String, usize> = HashMap::new();
        let mut bytes = 0;
        // What the last pulls brought past the last batch comes first, as
        // far as the bounds let it.
        let carried = std::mem::take(&mut self.carried);
        let mut carried = carried.into_iter();
        for pulled in carried.by_ref() {
            if !batch.is_empty() && self.over_bounds(&rows, bytes, &pulled) {
                self.carried.push(pulled);
                break;
            }
            add_rows(&mut rows, &pulled.rows);
            bytes += pulled.bytes();
            batch.push(pulled);
        }
        self.carried.extend(carried);
        if !self.carried.is_empty() {
            return batch;
        }
        let mut opened = (!batch.is_empty()).then(Instant::now);
        loop {
            let wait = match opened {
                None => idle_wait,
                Some(at) => match self.linger.checked_sub(at.elapsed()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return batch,
                },
            };
            let (stream, durable) = (self.link.stream.clone(), self.link.durable.clone());
            let connection = self.link.get().await;
            // At most what the batch has room for, but never less than one
            // message the server allows (a pull it could not fill would
            // bring nothing).
            let budget = self.max_bytes.saturating_sub(bytes).max(connection.max_payload + 4096);
            // Until a batch is open, a pull of one message: it answers as
            // soon as one arrives (a larger pull would wait until it is
            // full or expires), and the linger starts there.
            let asked = if opened.is_none() { 1 } else { PULL_MESSAGES };
            let pulled = match connection.fetch(&stream, &durable, asked, budget, wait).await {
                Ok(pulled) => pulled,
                Err(e) => {
                    self.link.failed(&e);
                    if opened.is_none() {
                        return batch;
                    }
                    continue;
                }
            };
            if pulled.is_empty() && opened.is_none() {
                return batch;
            }
            let mut full = false;
            for message in pulled {
                let Some(pulled) = Pulled::new(message) else { continue };
                // Delivered again while it waited here (past its ack wait):
                // the newer delivery replaces it, never a second copy.
                if let Some(held) = batch.iter_mut().chain(self.carried.iter_mut()).find(|p| p.seq == pulled.seq) {
                    *held = pulled;
                    continue;
                }
                if full || (!batch.is_empty() && self.over_bounds(&rows, bytes, &pulled)) {
                    full = true;
                    self.carried.push(pulled);
                    continue;
                }
                add_rows(&mut rows, &pulled.rows);
                bytes += pulled.bytes();
                batch.push(pulled);
                opened.get_or_insert_with(Instant::now);
            }
            if full {
                return batch;
            }
        }
    }

    /// Whether `pulled` would take a batch of `rows` and `bytes` past a bound.
    fn over_bounds(&self, rows: &HashMap<String, usize>, bytes: usize, pulled: &Pulled) -> bool {
        bytes + pulled.bytes() > self.max_bytes
            || pulled.rows.iter().any(|(table, n)| rows.get(table).copied().unwrap_or(0) + n > self.max_rows)
    }

    /// Commits a batch, split in two wherever a refusal names no record.
    async fn commit_batch(&mut self, batch: Vec<Pulled>) -> Result<(), Failure> {
        let mut groups = vec![batch];
        while let Some(group) = groups.pop() {
            if let Some((first, second)) = self.commit_group(group).await? {
                groups.push(second);
                groups.push(first);
            }
        }
        Ok(())
    }

    /// Reads what is done, acks it, and commits the rest of `group` once;
    /// the two halves to commit apart if a refusal names no record.
    async fn commit_group(&mut self, mut group: Vec<Pulled>) -> Result<Option<(Vec<Pulled>, Vec<Pulled>)>, Failure> {
        // (stream sequence, record index): refused, dead-lettered.
        let mut dead: BTreeSet<(u64, usize)> = BTreeSet::new();
        let mut backoff = FIRST_BACKOFF;
        loop {
            // The head first, then the newest key: the key is then at least
            // as new as the head the load is based on (`unchanged_since`).
            let (head, key) = match self.target.head_then_keyed(&self.branch, &self.keys.prefix).await {
                Ok(read) => read,
                Err(Failure::Operational(text) | Failure::Invalid(text)) if text.contains("branch_not_found") => {
                    return Err(operational(format!("consume: branch {:?} does not exist: {text}", self.branch)));
                }
                Err(Failure::Operational(text) | Failure::Invalid(text)) => {
                    eprintln!("consume: reading the branch: {text}");
                    backoff = pause(backoff).await;
                    continue;
                }
            };
            let mut done = key.as_deref().and_then(|k| self.keys.done_of(k)).unwrap_or_default();
            let floor = {
                let (stream, durable) = (self.link.stream.clone(), self.link.durable.clone());
                self.link.get().await.ack_floor(&stream, &durable).await
            };
            match floor {
                Ok(floor) => done.raise_floor(floor),
                Err(e) => {
                    self.link.failed(&e);
                    continue;
                }
            }
            let (finished, rest): (Vec<Pulled>, Vec<Pulled>) = group.into_iter().partition(|p| done.contains(p.seq));
            group = rest;
            self.ack(&finished).await;
            if group.is_empty() {
                return Ok(None);
            }
            let mut new_done = done.clone();
            let mut held = Vec::new();
            let mut keep = 0;
            for pulled in &group {
                let mut with = new_done.clone();
                with.insert(pulled.seq);
                if with.ranges.len() > MAX_DONE_RANGES {
                    break;
                }
                new_done = with;
                held.push(pulled.seq);
                keep += 1;
            }
            if keep == 0 {
                // Every message opens a range past the bound: gaps below
                // them are in flight elsewhere. Let them be delivered again.
                eprintln!("consume: {} messages wait for the gaps below them to close", group.len());
                tokio::time::sleep(self.linger.max(FIRST_BACKOFF)).await;
                return Ok(None);
            }
            if keep < group.len() {
                let later = group.split_off(keep);
                self.carried.splice(0..0, later);
            }
            let (batch, lines) = assemble(&group, &dead);
            if lines.is_empty() {
                // Everything left was dead-lettered.
                self.ack(&group).await;
                return Ok(None);
            }
            let request = LoadRequest {
                branch: self.branch.clone(),
                from: None,
                mode: self.mode,
                strict: true,
                actor: self.actor.clone(),
                batch: Arc::new(batch),
                batch_key: Some(self.keys.key(&ranges_of(held.iter().copied()), &new_done)),
                unchanged_since: Some(head),
            };
            match self.target.load(request).await {
                Ok(()) => {
                    self.ack(&group).await;
                    if let Some(server) = &self.server {
                        server.metrics.consumed(&self.link.stream, "committed", lines.len() as u64);
                    }
                    return Ok(None);
                }
                Err(refused) if refused.code == "target_moved" => continue,
                Err(refused) if refused.maybe_written => {
                    // The next read of the branch tells whether it landed.
                    eprintln!("consume: a commit's outcome is unknown; reading the branch again");
                    backoff = pause(backoff).await;
                }
                Err(refused) if matches!(refused.failure, Failure::Invalid(_)) || refused.splittable => {
                    let named = refused.details.as_ref().map(refused_records).unwrap_or_default();
                    let mut records: BTreeMap<(u64, usize), Vec<serde_json::Value>> = BTreeMap::new();
                    for (line, entries) in named {
                        if let Some(&(seq, record, batch_offset)) = lines.get((line as usize).wrapping_sub(1)) {
                            let pulled = group.iter().find(|p| p.seq == seq).expect("a batch line's message is in its group");
                            let at = Located { batch_line: line, batch_offset, line: pulled.record_lines[record] as u64, offset: pulled.records[record].start as u64 };
                            records.entry((seq, record)).or_default().extend(entries.into_iter().map(|entry| at.relocate(entry)));
                        }
                    }
                    if records.is_empty() {
                        if group.len() > 1 {
                            let second = group.split_off(group.len() / 2);
                            return Ok(Some((group, second)));
                        }
                        // One message, refused as a whole: all its records.
                        let whole = refused.details.clone().unwrap_or_else(|| serde_json::json!({"message": failure_text(&refused)}));
                        for (seq, record, _) in lines {
                            records.insert((seq, record), vec![whole.clone()]);
                        }
                    }
                    if !self.dead_letter(&group, &records).await {
                        continue;
                    }
                    if let Some(server) = &self.server {
                        server.metrics.consumed(&self.link.stream, "dead_lettered", records.len() as u64);
                    }
                    dead.extend(records.into_keys());
                }
                Err(refused) => {
                    eprintln!("consume: {}", failure_text(&refused));
                    match refused.retry_after {
                        // The host says when (429, 503); the backoff starts over after.
                        Some(wait) => {
                            tokio::time::sleep(wait).await;
                            backoff = FIRST_BACKOFF;
                        }
                        None => backoff = pause(backoff).await,
                    }
                }
            }
        }
    }

    /// Publishes each refused record with the entries that refused it to
    /// the dead-letter stream (once per record: its message id). False if
    /// NATS failed (the caller reads the branch again and retries).
    async fn dead_letter(&mut self, group: &[Pulled], records: &BTreeMap<(u64, usize), Vec<serde_json::Value>>) -> bool {
        let stream = self.link.stream.clone();
        let subject = self.link.dead_letter_subject.clone();
        let connection = self.link.get().await;
        for (&(seq, record), entries) in records {
            let Some(pulled) = group.iter().find(|p| p.seq == seq) else { continue };
            let range = pulled.records[record].clone();
            let line = pulled.record_lines[record];
            let mut letter = serde_json::json!({
                "stream": stream, "stream_seq": pulled.seq, "line": line,
                "record": String::from_utf8_lossy(&pulled.message.payload[range]),
                "errors": entries,
            });
            if letter.to_string().len() > connection.max_payload {
                letter["record"] = serde_json::Value::Null;
                letter["record_truncated"] = true.into();
            }
            let id = format!("{stream}/{}/{line}", pulled.seq);
            if let Err(e) = connection.publish_durably(&subject, &id, letter.to_string().as_bytes()).await {
                self.link.failed(&e);
                return false;
            }
        }
        true
    }

    /// Acks messages (best effort: an ack lost is a redelivery, which the
    /// done set in the branch's log answers).
    async fn ack(&mut self, messages: &[Pulled]) {
        if messages.is_empty() {
            return;
        }
        let connection = self.link.get().await;
        let mut outcome = Ok(());
        for pulled in messages {
            outcome = connection.ack(&pulled.message).await;
            if outcome.is_err() {
                break;
            }
        }
        if let Err(e) = outcome.and(connection.flush().await) {
            self.link.failed(&e);
        }
    }
}

/// The batch of `group`'s records not in `dead`, one per line, and for
/// each batch line (from 1) its stream sequence, record and byte offset.
fn assemble(group: &[Pulled], dead: &BTreeSet<(u64, usize)>) -> (Vec<u8>, Vec<(u64, usize, u64)>) {
    let mut batch = Vec::with_capacity(group.iter().map(Pulled::bytes).sum());
    let mut lines = Vec::new();
    for pulled in group {
        for (record, range) in pulled.records.iter().enumerate() {
            if dead.contains(&(pulled.seq, record)) {
                continue;
            }
            lines.push((pulled.seq, record, batch.len() as u64));
            batch.extend_from_slice(&pulled.message.payload[range.clone()]);
            batch.push(b'\n');
        }
    }
    (batch, lines)
}

/// A refused record's place in the batch the consumer submitted and in
/// its message: report entries are moved from the first to the second,
/// so a dead letter reads as if its message had been loaded alone.
struct Located {
    batch_line: u64,
    batch_offset: u64,
    line: u64,
    offset: u64,
}

impl Located {
    /// `entry` (a report error or a conflict) with its `line`, `offset`
    /// and its message's leading `line N: ` about the message.
    fn relocate(&self, mut entry: serde_json::Value) -> serde_json::Value {
        entry["line"] = self.line.into();
        if let Some(offset) = entry["offset"].as_u64() {
            entry["offset"] = (offset.saturating_sub(self.batch_offset) + self.offset).into();
        }
        let prefix = format!("line {}: ", self.batch_line);
        if let Some(rest) = entry["message"].as_str().and_then(|m| m.strip_prefix(&prefix)) {
            entry["message"] = format!("line {}: {rest}", self.line).into();
        }
        entry
    }
}

/// The entries of a refusal that name a record at fault, by batch line:
/// a batch's size bound names only the line where the batch passed it.
fn refused_records(details: &serde_json::Value) -> BTreeMap<u64, Vec<serde_json::Value>> {
    let batch_bound = |entry: &serde_json::Value| {
        let code = entry["code"].as_str().unwrap_or_default();
        SIZE_BOUND_CODES.contains(&code) && !RECORD_BOUND_CODES.contains(&code)
    };
    let mut named = refused_lines(details);
    named.retain(|_, entries| {
        entries.retain(|entry| !batch_bound(entry));
        !entries.is_empty()
    });
    named
}

fn failure_text(refused: &BatchRefused) -> String {
    match &refused.failure {
        Failure::Invalid(text) | Failure::Operational(text) => text.clone(),
    }
}

fn add_rows(total: &mut HashMap<String, usize>, more: &HashMap<String, usize>) {
    for (table, n) in more {
        *total.entry(table.clone()).or_default() += n;
    }
}

/// Sleeps `backoff`; the next one.
async fn pause(backoff: Duration) -> Duration {
    tokio::time::sleep(backoff).await;
    (backoff * 2).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_sets_merge_into_their_floor_and_round_trip_through_keys() {
        let mut done = Done::default();
        for seq in [5, 3, 4, 9, 10, 12] {
            done.insert(seq);
        }
        assert_eq!(done.encode(), "0+3-5,9-10,12");
        assert!(done.contains(4) && !done.contains(6) && !done.contains(1));
        done.insert(1);
        done.insert(2);
        assert_eq!(done.encode(), "5+9-10,12");
        done.raise_floor(9);
        assert_eq!(done.encode(), "10+12");
        done.insert(11);
        assert_eq!(done.encode(), "12");
        let keys = KeyFormat::new("IN", "c1");
        let key = keys.key(&ranges_of([13, 14, 16]), &Done::parse("14+16").unwrap());
        assert_eq!(key, "jetstream/IN/c1/13-14,16/14+16");
        assert_eq!(keys.done_of(&key), Done::parse("14+16"));
        assert_eq!(KeyFormat::new("IN", "c2").done_of(&key), None, "another consumer's key");
        assert_eq!(Done::parse("3+2-1"), None);
    }

    #[test]
    fn a_message_is_its_non_empty_lines() {
        let message = Message {
            subject: "in".into(),
            reply: Some("$JS.ACK.IN.c1.1.7.7.1.0".into()),
            headers: None,
            payload: b"{\"a\":1}\n\n  \n{\"b\":2}".to_vec(),
        };
        let pulled = Pulled::new(message).unwrap();
        assert_eq!((pulled.seq, pulled.records.len(), pulled.bytes()), (7, 2, 16));
        assert_eq!(pulled.record_lines, [1, 4], "blank lines count");
        let (batch, lines) = assemble(std::slice::from_ref(&pulled), &BTreeSet::from([(7, 0)]));
        assert_eq!((batch.as_slice(), lines), (&b"{\"b\":2}\n"[..], vec![(7, 1, 0)]));
    }

    #[test]
    fn a_batch_bound_names_no_record_and_a_record_bound_does() {
        let report = serde_json::json!({"errors": [
            {"line": 3, "code": "table_rows_limit", "limit": {}},
            {"line": 5, "code": "json_too_complex", "limit": {}},
            {"line": 5, "code": "type_mismatch"},
        ]});
        let named = refused_records(&report);
        assert_eq!(named.keys().collect::<Vec<_>>(), [&5]);
        assert_eq!(named[&5].len(), 2);
    }

    #[test]
    fn a_report_entry_is_moved_from_the_batch_to_the_message() {
        let at = Located { batch_line: 12, batch_offset: 500, line: 4, offset: 30 };
        let entry = serde_json::json!({"line": 12, "offset": 507, "code": "type_mismatch", "message": "line 12: age is a string"});
        let moved = at.relocate(entry);
        assert_eq!(moved, serde_json::json!({"line": 4, "offset": 37, "code": "type_mismatch", "message": "line 4: age is a string"}));
        let conflict = serde_json::json!({"line": 12, "code": "dangling_endpoint", "message": "edge Knows: no such node"});
        assert_eq!(at.relocate(conflict)["line"], 4, "a conflict has no offset; its line moves all the same");
    }
}
