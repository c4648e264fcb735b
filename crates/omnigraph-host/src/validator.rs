//! The host's validator: the exact `.wasm` file the npm package ships,
//! embedded at build time, compiled once and run in wasmtime (48) on every
//! batch. The host never trusts a client's verdict.
//!
//! Compiling the artifact with Cranelift takes about a second, so it is
//! done only when something validates (`log`, `export`, `branch` never
//! pay it) and at most once per machine: the compiled module is kept in a
//! cache directory keyed by the artifact's SHA-256 and wasmtime's
//! compatibility hash (version and engine settings; an entry is replaced by
//! rename), and later processes load it in milliseconds.
//!
//! Each batch gets a fresh instance from a pre-instantiated template (pooling
//! allocator: tens of microseconds; a reused slot keeps its memory and
//! tables mapped, reset by the pages the batch touched), a memory cap and an
//! epoch deadline. A trap becomes a typed error; the next batch starts from
//! a clean instance. At most `max_instances` run at once: a call beyond that
//! waits for a slot (up to its deadline, then `Busy`), so a burst of loads
//! queues briefly instead of being refused after its body was read. The
//! slot is taken before its instance is made and given back after its store
//! is dropped, so instantiating never meets a full pool; per-batch wasm
//! memory is at most `WASM_MEMORY_PER_BATCH_BYTE` × batch + base.
//! Instances share no state: what a batch does not re-do is the schema
//! compile. The artifact compiles each schema once (`og_compile`, in its own
//! fresh instance) and the host hands that compiled form to every batch's
//! instance (`og_validate_compiled`, `og_prepare_compiled`), so rules and
//! hash still come from the artifact alone.
//!
//! Over 600 lines only with its unit tests: the module cache, the pooling
//! slots and the ABI calls share one wasmtime `Engine` and its settings.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use arrow_buffer::Buffer;
use omnigraph_validate_wasm::abi::{self, PrepareOutcome, Status};
use omnigraph_validate_wasm::{PreparedBatch, Schema, batches_from_rows};
use sha2::{Digest, Sha256};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, InstancePre, Linker, Module, PoolingAllocationConfig, Store, Trap,
    Val,
};

use crate::auth::{hex, sha256_hex};
use crate::limits::{
    MAX_COMPILED_SCHEMAS, MODULE_CACHE_RETENTION, WASM_MEMORY_GUARD, WASM_MEMORY_RESERVATION, WASM_TABLE_KEEP_RESIDENT,
};

/// The validator artifact: `web/pkg/web/validate_bg.wasm`, as built by
/// `scripts/build-wasm.sh` and shipped in the npm package.
pub const ARTIFACT: &[u8] = include_bytes!("../../../web/pkg/web/validate_bg.wasm");

/// How often the epoch ticks; deadlines are whole ticks.
const EPOCH_TICK: Duration = Duration::from_millis(10);
const WASM_PAGE: u64 = 64 * 1024;
const MEMORY_SLOTS_PER_INSTANCE: u32 = 2;

/// Linear memory one validation needs is at most this many times the
/// batch's bytes plus [`WASM_MEMORY_BASE`]. Measured (docs/reliability.md):
/// 4.1× for big strings and blobs, ~9× for many small rows, vectors and
/// lists, 17.3× for batches of edges whose endpoints are all external
/// references (each is listed in the report); `tests/limits.rs` holds the
/// artifact to it.
pub const WASM_MEMORY_PER_BATCH_BYTE: u64 = 20;
/// The artifact's own memory (its data, stack and allocator) before a batch.
pub const WASM_MEMORY_BASE: u64 = 8 << 20;

/// Bounds of the runner. Defaults fit the default batch bounds (32 MiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerConfig {
    /// Linear memory one instance may use. Validation needs a few times the
    /// batch size (see docs/lab/2026-12-02-rows-copied-once.md).
    pub memory_limit: u64,
    /// Wall-clock budget of one call.
    pub deadline: Duration,
    /// Instances that may run at once (pooling slots); more calls wait.
    pub max_instances: u32,
    /// Memory each pooling slot keeps mapped between batches.
    pub keep_resident: u64,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig { memory_limit: 1 << 30, deadline: Duration::from_secs(30), max_instances: 16, keep_resident: 64 << 20 }
    }
}

/// What can go wrong running the artifact (never a verdict on the batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValidatorError {
    /// The engine or module could not be set up.
    Setup(String),
    /// Schema plus batch cannot fit the instance's memory cap.
    InputTooLarge { bytes: u64, limit: u64 },
    /// The call ran past its deadline.
    Timeout { deadline: Duration },
    /// The guest ran out of memory under its cap.
    MemoryLimit { limit: u64 },
    /// Any other trap (a bug in the validator).
    Trap(String),
    /// No pooling slot came free within the deadline.
    Busy,
    /// The module answered outside the ABI.
    Abi(String),
}

impl std::fmt::Display for ValidatorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValidatorError::Setup(e) => write!(f, "validator setup failed: {e}"),
            ValidatorError::InputTooLarge { bytes, limit } => {
                write!(f, "input of {bytes} bytes does not fit the validator's memory limit of {limit} bytes")
            }
            ValidatorError::Timeout { deadline } => write!(f, "validation exceeded its deadline of {deadline:?}"),
            ValidatorError::MemoryLimit { limit } => write!(f, "validation exceeded its memory limit of {limit} bytes"),
            ValidatorError::Trap(e) => write!(f, "the validator trapped: {e}"),
            ValidatorError::Busy => write!(f, "no validator instance is free"),
            ValidatorError::Abi(e) => write!(f, "the validator broke its ABI: {e}"),
        }
    }
}

impl std::error::Error for ValidatorError {}

/// The result of `validate`: the report, or why the inputs were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValidateOutcome {
    /// The report JSON (SPEC §3), byte for byte as every runtime gives it.
    Report(String),
    SchemaError(String),
    OptionsError(String),
}

/// The result of `prepare`: Arrow per touched table for an accepted batch.
#[derive(Debug, Clone, PartialEq)]
pub enum PrepareResult {
    Accepted { report_json: String, tables: Vec<PreparedBatch> },
    Rejected { report_json: String },
    SchemaError(String),
    OptionsError(String),
}

/// Ticks the engine's epoch until dropped.
struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            // Woken now, not at its next tick: a process that drops its
            // validator (every CLI run) does not wait out a tick.
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// The pooling slots not in use: a call takes one before its instance is
/// made and gives it back after its store is dropped, so instantiating
/// never finds the pool full.
struct Slots {
    free: Mutex<u32>,
    freed: Condvar,
}

/// One taken slot, given back on drop.
struct Slot<'a>(&'a Slots);

impl Slots {
    /// A slot, waiting up to `patience` for one (then `Busy`).
    fn take(&self, patience: Duration) -> Result<Slot<'_>, ValidatorError> {
        let free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let (mut free, _) = self
            .freed
            .wait_timeout_while(free, patience, |free| *free == 0)
            .unwrap_or_else(|e| e.into_inner());
        if *free == 0 {
            return Err(ValidatorError::Busy);
        }
        *free -= 1;
        Ok(Slot(self))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

pub struct Validator {
    engine: Engine,
    slots: Slots,
    module_cache: Option<PathBuf>,
    /// The compiled module, made on first use (an error is kept: it would recur).
    pre: OnceLock<Result<InstancePre<()>, ValidatorError>>,
    sha256: OnceLock<String>,
    /// Schema source → the artifact's compiled form of it.
    compiled: Mutex<HashMap<String, Arc<[u8]>>>,
    config: RunnerConfig,
    _ticker: Ticker,
}

/// A schema as the artifact compiled it, or the artifact's schema error.
enum Compiled {
    Form(Arc<[u8]>),
    SchemaError(String),
}

/// Where compiled modules are kept unless `OMNIGRAPH_MODULE_CACHE` says
/// otherwise (`off` keeps none): `$XDG_CACHE_HOME/omnigraph-ingest/wasmtime`,
/// else `$HOME/.cache/omnigraph-ingest/wasmtime`.
pub fn default_module_cache() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    match var("OMNIGRAPH_MODULE_CACHE") {
        Some(dir) if dir == "off" => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => var("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|home| Path::new(&home).join(".cache")))
            .map(|cache| cache.join("omnigraph-ingest").join("wasmtime")),
    }
}

impl Validator {
    /// The embedded artifact, its compiled module kept in
    /// [`default_module_cache`]. Compiling waits for the first call (or
    /// [`Validator::ready`]).
    pub fn new(config: RunnerConfig) -> Result<Validator, ValidatorError> {
        Self::with_module_cache(config, default_module_cache())
    }

    /// [`Validator::new`] with compiled modules kept in `module_cache`
    /// (`None`: compiled in every process).
    pub fn with_module_cache(config: RunnerConfig, module_cache: Option<PathBuf>) -> Result<Validator, ValidatorError> {
        let engine = Engine::new(&engine_config(&config)).map_err(setup_error)?;
        let stop = Arc::new(AtomicBool::new(false));
        let ticker_engine = engine.weak();
        let ticker_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("validator-epoch".into())
            .spawn(move || {
                loop {
                    // Parked until the tick is due (a wake-up before it
                    // parks again), or until the ticker is dropped.
                    let due = Instant::now() + EPOCH_TICK;
                    while let Some(left) = due.checked_duration_since(Instant::now()).filter(|left| !left.is_zero()) {
                        if ticker_stop.load(Ordering::Acquire) {
                            return;
                        }
                        std::thread::park_timeout(left);
                    }
                    if ticker_stop.load(Ordering::Acquire) {
                        return;
                    }
                    match ticker_engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => return,
                    }
                }
            })
            .map_err(|e| ValidatorError::Setup(format!("epoch thread: {e}")))?;
        Ok(Validator {
            engine,
            slots: Slots { free: Mutex::new(config.max_instances), freed: Condvar::new() },
            module_cache,
            pre: OnceLock::new(),
            sha256: OnceLock::new(),
            compiled: Mutex::new(HashMap::new()),
            config,
            _ticker: Ticker { stop, thread: Some(thread) },
        })
    }

    /// Compiles (or loads from the cache) the module now rather than at the
    /// first call; a server calls it at start-up so setup errors show there.
    pub fn ready(&self) -> Result<(), ValidatorError> {
        self.pre().map(|_| ())
    }

    fn pre(&self) -> Result<&InstancePre<()>, ValidatorError> {
        self.pre
            .get_or_init(|| {
                let module = self.module()?;
                let mut linker: Linker<()> = Linker::new(&self.engine);
                // wasm-bindgen's JS glue imports are never called through the plain ABI.
                linker.define_unknown_imports_as_traps(&module).map_err(setup_error)?;
                linker.instantiate_pre(&module).map_err(setup_error)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The compiled artifact: from the cache when a valid entry is there,
    /// else compiled and (best effort) put there for the next process.
    fn module(&self) -> Result<Module, ValidatorError> {
        let entry = self.module_cache.as_ref().map(|dir| dir.join(self.cache_entry_name()));
        // Read, not mapped: a file changed under a mapping would fault the
        // process; a copy is a few milliseconds.
        if let Some(entry) = &entry
            && let Ok(bytes) = std::fs::read(entry)
            // SAFETY: the entry was written by `Module::serialize` of this
            // wasmtime (its name carries the compatibility hash, and
            // `deserialize` checks version and settings again, refusing
            // anything that is not a compiled module). Whoever can write the
            // cache directory can run code as this user anyway.
            && let Ok(module) = unsafe { Module::deserialize(&self.engine, &bytes) }
        {
            // Marks the entry used, so pruning keeps it (best effort).
            let _ = std::fs::File::options().write(true).open(entry).and_then(|f| f.set_modified(SystemTime::now()));
            return Ok(module);
        }
        let module = Module::new(&self.engine, ARTIFACT).map_err(setup_error)?;
        if let Some(entry) = &entry {
            // A cache that cannot be written only costs the next process a compile.
            let _ = store_module(&module, entry);
        }
        Ok(module)
    }

    /// `<artifact sha256>-<sha256 of wasmtime's compatibility hash>.cwasm`.
    fn cache_entry_name(&self) -> String {
        use std::hash::Hash;
        let mut compatibility = DigestHasher(Sha256::new());
        self.engine.precompile_compatibility_hash().hash(&mut compatibility);
        format!("{}-{}.cwasm", self.artifact_sha256(), hex(&compatibility.0.finalize()))
    }

    /// Hex SHA-256 of the artifact this validator runs (for `/rules`).
    pub fn artifact_sha256(&self) -> &str {
        self.sha256.get_or_init(|| sha256_hex(ARTIFACT))
    }

    pub fn abi_version(&self) -> Result<u32, ValidatorError> {
        // Declared before the store, so dropped after it: the slot is free
        // again only once the instance has left the pool's slot.
        let _slot = self.slots.take(self.config.deadline)?;
        let mut store = self.store();
        let instance = self.instantiate(&mut store)?;
        let f = instance
            .get_typed_func::<(), u32>(&mut store, "og_abi_version")
            .map_err(|e| ValidatorError::Abi(e.to_string()))?;
        f.call(&mut store, ()).map_err(|e| self.classify(e, &mut store, &instance))
    }

    /// The artifact's compiled form of `schema`: made once per schema source
    /// (in a fresh instance, like a batch) and kept.
    fn compiled(&self, schema: &str) -> Result<Compiled, ValidatorError> {
        if let Some(form) = self.compiled.lock().expect("compiled schemas").get(schema) {
            return Ok(Compiled::Form(form.clone()));
        }
        let out = self.call("og_compile", &[schema.as_bytes()])?;
        let (status, body) = split_status(&out)?;
        match status {
            Status::Compiled => {
                let form: Arc<[u8]> = body.into();
                let mut kept = self.compiled.lock().expect("compiled schemas");
                // A host has a schema per graph; a bound keeps a process that
                // validates ever new schemas (the CLI on many files) in memory.
                if kept.len() >= MAX_COMPILED_SCHEMAS {
                    kept.clear();
                }
                kept.insert(schema.to_owned(), form.clone());
                Ok(Compiled::Form(form))
            }
            Status::SchemaError => Ok(Compiled::SchemaError(text(body)?)),
            other => Err(ValidatorError::Abi(format!("og_compile answered {other:?}"))),
        }
    }

    /// Validates a batch: the report, as every runtime produces it.
    pub fn validate(&self, schema: &str, options: &[u8], batch: &[u8]) -> Result<ValidateOutcome, ValidatorError> {
        let form = match self.compiled(schema)? {
            Compiled::Form(form) => form,
            Compiled::SchemaError(e) => return Ok(ValidateOutcome::SchemaError(e)),
        };
        let out = self.call("og_validate_compiled", &[&form[..], options, batch])?;
        let (status, body) = split_status(&out)?;
        match status {
            Status::Report => Ok(ValidateOutcome::Report(text(body)?)),
            Status::OptionsError => Ok(ValidateOutcome::OptionsError(text(body)?)),
            other => Err(ValidatorError::Abi(format!("og_validate_compiled answered {other:?}: {}", String::from_utf8_lossy(body)))),
        }
    }

    /// Validates a batch in the artifact and, if it is accepted, turns the
    /// canonical rows it returns into an Arrow record batch per table
    /// (natively: the artifact carries no Arrow code).
    pub fn prepare(&self, schema: &str, options: &[u8], batch: &[u8]) -> Result<PrepareResult, ValidatorError> {
        // The artifact compiles this schema too; natively it cannot fail.
        let compiled = Schema::compile(schema).map_err(|e| ValidatorError::Abi(format!("schema: {e}")))?;
        self.prepare_compiled(schema, &compiled, options, batch)
    }

    /// [`Validator::prepare`] for a caller that keeps the schema compiled
    /// natively (`compiled` must be `schema` compiled): no per-batch compile.
    pub fn prepare_compiled(
        &self,
        schema: &str,
        compiled: &Schema,
        options: &[u8],
        batch: &[u8],
    ) -> Result<PrepareResult, ValidatorError> {
        let form = match self.compiled(schema)? {
            Compiled::Form(form) => form,
            Compiled::SchemaError(e) => return Ok(PrepareResult::SchemaError(e)),
        };
        let abi_error = |e: abi::MalformedBuffer| ValidatorError::Abi(e.to_string());
        // The rows are copied once, out of the instance's memory into an
        // aligned buffer that the tables' arrays then slice.
        let outcome = self.call_with("og_prepare_compiled", &[&form[..], options, batch], |out| {
            abi::decode_prepare(out).map(|outcome| outcome.map_rows(Buffer::from))
        })?;
        Ok(match outcome.map_err(abi_error)? {
            PrepareOutcome::Accepted { report_json, rows } => {
                PrepareResult::Accepted { report_json, tables: batches_from_rows(compiled, rows).map_err(abi_error)? }
            }
            PrepareOutcome::Rejected { report_json } => PrepareResult::Rejected { report_json },
            PrepareOutcome::SchemaError(e) => PrepareResult::SchemaError(e),
            PrepareOutcome::OptionsError(e) => PrepareResult::OptionsError(e),
            PrepareOutcome::CompiledFormError(e) => return Err(ValidatorError::Abi(format!("og_prepare_compiled: {e}"))),
        })
    }

    fn store(&self) -> Store<()> {
        let mut store = Store::new(&self.engine, ());
        let ticks = self.config.deadline.as_millis().div_ceil(EPOCH_TICK.as_millis()).max(1) as u64;
        store.set_epoch_deadline(ticks);
        store
    }

    fn instantiate(&self, store: &mut Store<()>) -> Result<wasmtime::Instance, ValidatorError> {
        self.pre()?.instantiate(&mut *store).map_err(|e| {
            let text = format!("{e:#}");
            if text.contains("maximum concurrent") || text.contains("pooling") {
                ValidatorError::Busy
            } else {
                ValidatorError::Setup(text)
            }
        })
    }

    /// One call on a fresh instance with `inputs` as (pointer, length)
    /// pairs, giving its result buffer; the store (and with it any state a
    /// trap may have left half-updated) is dropped afterwards.
    fn call(&self, export: &str, inputs: &[&[u8]]) -> Result<Vec<u8>, ValidatorError> {
        self.call_with(export, inputs, <[u8]>::to_vec)
    }

    /// [`Validator::call`] that gives what `read` makes of the result
    /// buffer, read where it lies in the instance's memory.
    fn call_with<T>(&self, export: &str, inputs: &[&[u8]], read: impl FnOnce(&[u8]) -> T) -> Result<T, ValidatorError> {
        let input: u64 = inputs.iter().map(|b| b.len() as u64).sum();
        // The guest needs the inputs plus working memory: refuse early rather
        // than trap half-way (a guest allocation failure is a trap).
        if input.saturating_mul(2) > self.config.memory_limit {
            return Err(ValidatorError::InputTooLarge { bytes: input, limit: self.config.memory_limit });
        }
        let _slot = self.slots.take(self.config.deadline)?; // dropped after the store, as in `abi_version`
        let mut store = self.store();
        let instance = self.instantiate(&mut store)?;
        let abi = |e: wasmtime::Error| ValidatorError::Abi(e.to_string());
        let memory = instance.get_memory(&mut store, "memory").ok_or_else(|| ValidatorError::Abi("no memory export".into()))?;
        let alloc = instance.get_typed_func::<u32, u32>(&mut store, "og_alloc").map_err(abi)?;
        let run = instance.get_func(&mut store, export).ok_or_else(|| ValidatorError::Abi(format!("no export {export}")))?;
        let mut params = Vec::with_capacity(inputs.len() * 2);
        for bytes in inputs {
            let len = u32::try_from(bytes.len()).map_err(|_| ValidatorError::InputTooLarge {
                bytes: bytes.len() as u64,
                limit: self.config.memory_limit,
            })?;
            let ptr = alloc.call(&mut store, len).map_err(|e| self.classify(e, &mut store, &instance))?;
            memory.write(&mut store, ptr as usize, bytes).map_err(|e| ValidatorError::Abi(e.to_string()))?;
            params.extend([Val::I32(ptr as i32), Val::I32(len as i32)]);
        }
        let mut results = [Val::I64(0)];
        run.call(&mut store, &params, &mut results).map_err(|e| self.classify(e, &mut store, &instance))?;
        let packed = results[0].i64().ok_or_else(|| ValidatorError::Abi(format!("{export} returned no i64")))? as u64;
        let (ptr, len) = ((packed >> 32) as usize, (packed & 0xffff_ffff) as usize);
        memory
            .data(&store)
            .get(ptr..ptr + len)
            .map(read)
            .ok_or_else(|| ValidatorError::Abi("result buffer outside memory".into()))
    }

    fn classify(&self, e: wasmtime::Error, store: &mut Store<()>, instance: &wasmtime::Instance) -> ValidatorError {
        match e.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => ValidatorError::Timeout { deadline: self.config.deadline },
            Some(Trap::UnreachableCodeReached) => {
                // Rust aborts with `unreachable` when an allocation fails:
                // near the cap, that is the memory limit.
                let used = instance.get_memory(&mut *store, "memory").map_or(0, |m| m.size(&*store) * WASM_PAGE);
                if used + 64 * WASM_PAGE >= self.config.memory_limit {
                    ValidatorError::MemoryLimit { limit: self.config.memory_limit }
                } else {
                    ValidatorError::Trap(format!("{e:#}"))
                }
            }
            _ => ValidatorError::Trap(format!("{e:#}")),
        }
    }
}

/// Writes a compiled module to `entry` through a temporary file and a
/// rename, so readers see a whole entry or none.
/// wasmtime's configuration for the artifact: epoch interruption for the
/// deadline, pooling slots bounded by `config`, and the memory reservation
/// under which the compiled code needs no bounds checks.
fn pooling_config(config: &RunnerConfig) -> PoolingAllocationConfig {
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_core_instances(config.max_instances)
        // Each instance takes two memory slots: its linear memory and the
        // GC heap behind wasm-bindgen's externref table.
        .total_memories(config.max_instances * MEMORY_SLOTS_PER_INSTANCE)
        .total_tables(config.max_instances * 2)
        .total_gc_heaps(config.max_instances)
        .max_tables_per_module(2)
        .max_memory_size(config.memory_limit as usize)
        // Reused slots keep this much memory mapped (zeroed with memset),
        // so a batch does not pay page faults for every page it touches.
        .linear_memory_keep_resident(config.keep_resident as usize)
        .table_keep_resident(WASM_TABLE_KEEP_RESIDENT)
        // Resetting a reused slot memsets only the pages the batch touched,
        // found with Linux's PAGEMAP_SCAN (6.7+; Auto falls back to a memset
        // of the whole kept region where it is missing): a fresh instance
        // 30 -> 5.6 us, a 1-line batch 76 -> 45 us (docs/lab/2026-12-01-schema-compiled-once.md).
        .pagemap_scan(Enabled::Auto);
    pooling
}

fn engine_config(config: &RunnerConfig) -> Config {
    let mut wasm_config = Config::new();
    wasm_config
        .epoch_interruption(true)
        .memory_reservation(WASM_MEMORY_RESERVATION)
        .memory_guard_size(WASM_MEMORY_GUARD)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pooling_config(config)));
    wasm_config
}

fn store_module(module: &Module, entry: &Path) -> std::io::Result<()> {
    let bytes = module.serialize().map_err(std::io::Error::other)?;
    let dir = entry.parent().expect("an entry is inside the cache directory");
    std::fs::create_dir_all(dir)?;
    // Unique per process and call: two writers never share a staging file.
    static STAGED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let staged = dir.join(format!(
        ".staged-{}-{}",
        std::process::id(),
        STAGED.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::write(&staged, &bytes).and_then(|()| std::fs::rename(&staged, entry));
    if written.is_err() {
        let _ = std::fs::remove_file(&staged);
    }
    written?;
    prune_module_cache(dir, entry);
    Ok(())
}

/// Removes entries (and staging files a killed writer left) that have not
/// been used for [`MODULE_CACHE_RETENTION`], except `keep`; what cannot be
/// read or removed is left.
fn prune_module_cache(dir: &Path, keep: &Path) {
    let Ok(listing) = std::fs::read_dir(dir) else { return };
    let now = SystemTime::now();
    for item in listing.flatten() {
        let path = item.path();
        let name = item.file_name();
        let name = name.to_string_lossy();
        let ours = name.ends_with(".cwasm") || name.starts_with(".staged-");
        let unused_for = item.metadata().and_then(|m| m.modified()).map(|at| now.duration_since(at).unwrap_or_default());
        if ours && path != keep && unused_for.is_ok_and(|age| age > MODULE_CACHE_RETENTION) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// A result buffer's status byte and body.
fn split_status(out: &[u8]) -> Result<(Status, &[u8]), ValidatorError> {
    let (&status, body) = out.split_first().ok_or_else(|| ValidatorError::Abi("empty result".into()))?;
    let status = Status::from_byte(status).ok_or_else(|| ValidatorError::Abi(format!("unknown status byte {status}")))?;
    Ok((status, body))
}

fn text(body: &[u8]) -> Result<String, ValidatorError> {
    String::from_utf8(body.to_vec()).map_err(|_| ValidatorError::Abi("result is not UTF-8".into()))
}

fn setup_error(e: wasmtime::Error) -> ValidatorError {
    ValidatorError::Setup(format!("{e:#}"))
}

/// Feeds what a `Hash` writes into SHA-256: a name that is the same in
/// every process (std's hashers promise no such thing).
struct DigestHasher(Sha256);

impl std::hash::Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Never read: the name comes from the digest.
    fn finish(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tunable of the engine configuration as wasmtime reports it (only
    /// those set explicitly are listed).
    fn tunable(config: &Config, name: &str) -> u64 {
        let debug = format!("{config:?}");
        let at = debug.find(&format!("{name}: ")).unwrap_or_else(|| panic!("{name} is not set explicitly: {debug}"));
        let digits: String = debug[at + name.len() + 2..].chars().take_while(char::is_ascii_digit).collect();
        digits.parse().expect("a number")
    }

    #[test]
    fn the_artifact_runs_without_bounds_checks() {
        let config = engine_config(&RunnerConfig::default());
        // Every 32-bit index lands in reserved address space, and static
        // offsets in the guard after it: wasmtime then emits no bounds check.
        assert!(tunable(&config, "memory_reservation") >= 1 << 32, "a memory reservation under 4 GiB brings bounds checks back");
        assert!(tunable(&config, "memory_guard_size") >= 32 << 20, "a smaller guard brings bounds checks back for static offsets");
        Engine::new(&config).expect("the configuration is valid");
    }

    #[test]
    fn reused_slots_are_reset_by_the_pages_they_touched() {
        let pooling = format!("{:?}", pooling_config(&RunnerConfig::default()));
        assert!(pooling.contains("pagemap_scan: Auto"), "without PAGEMAP_SCAN a reset memsets the whole kept region: {pooling}");
    }

    #[test]
    fn reused_slots_keep_the_artifacts_tables_resident() {
        let pooling = format!("{:?}", pooling_config(&RunnerConfig::default()));
        let kept = format!("table_keep_resident: {WASM_TABLE_KEEP_RESIDENT}");
        assert!(pooling.contains(&kept), "without it every batch faults its tables back in: {pooling}");
        // Both of the artifact's tables fit (an entry is a pointer wide):
        // twice the larger, wasm-bindgen's externrefs (exported; the indirect
        // functions' table has 325 entries).
        let module = Validator::new(RunnerConfig::default()).unwrap().module().unwrap();
        let tables: Vec<u64> = module.exports().filter_map(|e| e.ty().table().map(|t| t.minimum())).collect();
        assert!(!tables.is_empty(), "the artifact exports its externref table");
        for entries in tables {
            assert!(entries * 8 * 2 <= WASM_TABLE_KEEP_RESIDENT as u64, "a table of {entries} entries outgrows the kept region");
        }
    }
}
