//! The plain byte-buffer ABI for non-JS hosts (wasmtime). Versioned by
//! [`ABI_VERSION`]; the same functions are exported from the wasm module as
//! `og_*` (see `exports` below) and callable natively for tests.
//!
//! `validate` and `prepare` take UTF-8 schema source, options JSON (empty =
//! defaults) and the batch bytes. `compile` takes the schema source alone
//! and gives its compiled form ([`Schema::compiled_form`]), which
//! `validate_compiled` and `prepare_compiled` take in place of the source:
//! a host compiles a graph's schema once and no batch parses or hashes it
//! again. Every call returns one buffer whose first byte is a [`Status`]:
//!
//! * `validate`: `Report` → the report JSON (SPEC §3).
//! * `prepare`: `Accepted` → `u32 report_len` (little-endian), the report
//!   JSON, then the canonical rows (Arrow column buffers, see `rows.rs`;
//!   hosts wrap them into Arrow with `batches_from_rows`); `Rejected` → the
//!   report JSON.
//! * `compile`: `Compiled` → the compiled form.
//! * any: `SchemaError` → `{"errors":[{line,column,message}…]}`;
//!   `OptionsError` → the message; `CompiledFormError` → why a compiled form
//!   is not one of this validator.

pub use crate::rows::MalformedBuffer;
use crate::{Options, Schema, prepare_rows_after, validate};

/// Version of this ABI; bumped on any change to the functions or buffers
/// (2: every canonical row carries its batch line; 3: compiled schemas;
/// 4: canonical rows are Arrow column buffers, not tagged values).
pub const ABI_VERSION: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    Report = b'0',
    Accepted = b'1',
    Rejected = b'2',
    SchemaError = b'3',
    OptionsError = b'4',
    Compiled = b'5',
    CompiledFormError = b'6',
}

impl Status {
    pub fn from_byte(b: u8) -> Option<Status> {
        [
            Status::Report,
            Status::Accepted,
            Status::Rejected,
            Status::SchemaError,
            Status::OptionsError,
            Status::Compiled,
            Status::CompiledFormError,
        ]
        .into_iter()
        .find(|s| *s as u8 == b)
    }
}

fn with(status: Status, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 1);
    out.push(status as u8);
    out.extend_from_slice(body);
    out
}

/// Compiles the schema source, or gives the error buffer.
fn compile_source(schema: &[u8]) -> Result<Schema, Vec<u8>> {
    let source = std::str::from_utf8(schema).map_err(|e| {
        let errors = crate::SchemaErrors {
            errors: vec![crate::SchemaError { line: 1, column: 1, message: format!("schema is not UTF-8: {e}") }],
        };
        with(Status::SchemaError, serde_json::to_string(&errors).expect("serializes").as_bytes())
    })?;
    Schema::compile(source).map_err(|e| with(Status::SchemaError, serde_json::to_string(&e).expect("serializes").as_bytes()))
}

/// Reads a compiled form, or gives the error buffer.
fn read_compiled(form: &[u8]) -> Result<Schema, Vec<u8>> {
    Schema::from_compiled(form).map_err(|e| with(Status::CompiledFormError, e.to_string().as_bytes()))
}

fn parse_options(options: &[u8]) -> Result<Options, Vec<u8>> {
    if options.is_empty() {
        return Ok(Options::default());
    }
    Options::from_json(options).map_err(|e| with(Status::OptionsError, e.to_string().as_bytes()))
}

/// `og_compile`'s result buffer.
pub fn compile_buffer(schema: &[u8]) -> Vec<u8> {
    match compile_source(schema) {
        Ok(schema) => with(Status::Compiled, &schema.compiled_form()),
        Err(buffer) => buffer,
    }
}

/// `og_validate`'s result buffer.
pub fn validate_buffer(schema: &[u8], options: &[u8], batch: &[u8]) -> Vec<u8> {
    validate_with(compile_source(schema), options, batch)
}

/// `og_validate_compiled`'s result buffer.
pub fn validate_compiled_buffer(form: &[u8], options: &[u8], batch: &[u8]) -> Vec<u8> {
    validate_with(read_compiled(form), options, batch)
}

/// `og_prepare`'s result buffer.
pub fn prepare_buffer(schema: &[u8], options: &[u8], batch: &[u8]) -> Vec<u8> {
    prepare_with(compile_source(schema), options, batch)
}

/// `og_prepare_compiled`'s result buffer.
pub fn prepare_compiled_buffer(form: &[u8], options: &[u8], batch: &[u8]) -> Vec<u8> {
    prepare_with(read_compiled(form), options, batch)
}

fn validate_with(schema: Result<Schema, Vec<u8>>, options: &[u8], batch: &[u8]) -> Vec<u8> {
    match schema.and_then(|schema| Ok((schema, parse_options(options)?))) {
        Ok((schema, options)) => with(Status::Report, validate(&schema, &options, batch).to_json().as_bytes()),
        Err(buffer) => buffer,
    }
}

fn prepare_with(schema: Result<Schema, Vec<u8>>, options: &[u8], batch: &[u8]) -> Vec<u8> {
    let (schema, options) = match schema.and_then(|schema| Ok((schema, parse_options(options)?))) {
        Ok(ok) => ok,
        Err(buffer) => return buffer,
    };
    let head = |report: &crate::Report, rows_bytes: usize| {
        let report = report.to_json();
        let mut out = Vec::with_capacity(1 + 4 + report.len() + rows_bytes);
        out.push(Status::Accepted as u8);
        out.extend_from_slice(&(report.len() as u32).to_le_bytes());
        out.extend_from_slice(report.as_bytes());
        out
    };
    match prepare_rows_after(&schema, &options, batch, head) {
        Err(report) => with(Status::Rejected, report.to_json().as_bytes()),
        Ok((_, out)) => out,
    }
}

/// A decoded `og_prepare` buffer, for hosts; `R` holds the canonical rows
/// ([`decode_prepare`] borrows them from the buffer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrepareOutcome<R> {
    /// The report JSON and the canonical rows.
    Accepted { report_json: String, rows: R },
    Rejected { report_json: String },
    SchemaError(String),
    OptionsError(String),
    /// The compiled form given is not one of this validator.
    CompiledFormError(String),
}

impl<R> PrepareOutcome<R> {
    /// The same outcome with its rows turned by `f` (into a host's own
    /// buffer, say, before the result buffer is dropped).
    pub fn map_rows<S>(self, f: impl FnOnce(R) -> S) -> PrepareOutcome<S> {
        match self {
            PrepareOutcome::Accepted { report_json, rows } => PrepareOutcome::Accepted { report_json, rows: f(rows) },
            PrepareOutcome::Rejected { report_json } => PrepareOutcome::Rejected { report_json },
            PrepareOutcome::SchemaError(e) => PrepareOutcome::SchemaError(e),
            PrepareOutcome::OptionsError(e) => PrepareOutcome::OptionsError(e),
            PrepareOutcome::CompiledFormError(e) => PrepareOutcome::CompiledFormError(e),
        }
    }
}

fn rest_text(bytes: &[u8]) -> Result<String, MalformedBuffer> {
    String::from_utf8(bytes.to_vec()).map_err(|_| MalformedBuffer("text is not UTF-8"))
}

pub fn decode_prepare(buffer: &[u8]) -> Result<PrepareOutcome<&[u8]>, MalformedBuffer> {
    let (&status, body) = buffer.split_first().ok_or(MalformedBuffer("empty"))?;
    match Status::from_byte(status) {
        Some(Status::Rejected) => Ok(PrepareOutcome::Rejected { report_json: rest_text(body)? }),
        Some(Status::SchemaError) => Ok(PrepareOutcome::SchemaError(rest_text(body)?)),
        Some(Status::OptionsError) => Ok(PrepareOutcome::OptionsError(rest_text(body)?)),
        Some(Status::CompiledFormError) => Ok(PrepareOutcome::CompiledFormError(rest_text(body)?)),
        Some(Status::Accepted) => {
            let (len, rest) = body.split_first_chunk::<4>().ok_or(MalformedBuffer("truncated"))?;
            let len = u32::from_le_bytes(*len) as usize;
            if rest.len() < len {
                return Err(MalformedBuffer("truncated"));
            }
            let (report, rows) = rest.split_at(len);
            Ok(PrepareOutcome::Accepted { report_json: rest_text(report)?, rows })
        }
        Some(Status::Report | Status::Compiled) | None => Err(MalformedBuffer("not a prepare result")),
    }
}

/// The wasm exports. Buffers cross as (pointer, length) in the module's
/// memory; results are packed as `pointer << 32 | length` and must be
/// released with `og_free`.
#[cfg(target_arch = "wasm32")]
mod exports {
    use super::*;

    fn leak(out: Vec<u8>) -> u64 {
        let boxed = out.into_boxed_slice();
        let len = boxed.len() as u64;
        let ptr = Box::into_raw(boxed) as *mut u8 as u32 as u64;
        (ptr << 32) | len
    }

    /// # Safety
    /// `ptr`/`len` must come from `og_alloc` (or be 0/0).
    unsafe fn input<'b>(ptr: *const u8, len: u32) -> &'b [u8] {
        if len == 0 { &[] } else { unsafe { std::slice::from_raw_parts(ptr, len as usize) } }
    }

    #[unsafe(no_mangle)]
    pub extern "C" fn og_abi_version() -> u32 {
        ABI_VERSION
    }

    /// Allocates `len` bytes for an input buffer, which the host fills
    /// whole before passing it. Not zeroed: zeroing a batch's buffer only
    /// to overwrite it cost ~1.5 % of a 32 MiB batch in wasmtime.
    #[unsafe(no_mangle)]
    pub extern "C" fn og_alloc(len: u32) -> *mut u8 {
        Box::into_raw(Box::<[u8]>::new_uninit_slice(len as usize)).cast::<u8>()
    }

    /// Frees a buffer from `og_alloc` or a result buffer.
    ///
    /// # Safety
    /// `ptr`/`len` must describe one live buffer given out by this module.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn og_free(ptr: *mut u8, len: u32) {
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len as usize)) });
    }

    /// # Safety
    /// Every (pointer, length) pair must come from `og_alloc`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn og_validate(sp: *const u8, sl: u32, op: *const u8, ol: u32, bp: *const u8, bl: u32) -> u64 {
        leak(unsafe { validate_buffer(input(sp, sl), input(op, ol), input(bp, bl)) })
    }

    /// # Safety
    /// Every (pointer, length) pair must come from `og_alloc`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn og_prepare(sp: *const u8, sl: u32, op: *const u8, ol: u32, bp: *const u8, bl: u32) -> u64 {
        leak(unsafe { prepare_buffer(input(sp, sl), input(op, ol), input(bp, bl)) })
    }

    /// # Safety
    /// The (pointer, length) pair must come from `og_alloc`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn og_compile(sp: *const u8, sl: u32) -> u64 {
        leak(unsafe { compile_buffer(input(sp, sl)) })
    }

    /// # Safety
    /// Every (pointer, length) pair must come from `og_alloc`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn og_validate_compiled(cp: *const u8, cl: u32, op: *const u8, ol: u32, bp: *const u8, bl: u32) -> u64 {
        leak(unsafe { validate_compiled_buffer(input(cp, cl), input(op, ol), input(bp, bl)) })
    }

    /// # Safety
    /// Every (pointer, length) pair must come from `og_alloc`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn og_prepare_compiled(cp: *const u8, cl: u32, op: *const u8, ol: u32, bp: *const u8, bl: u32) -> u64 {
        leak(unsafe { prepare_compiled_buffer(input(cp, cl), input(op, ol), input(bp, bl)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prepare_rows;

    const SCHEMA: &[u8] = b"node P { name: String @key }";

    #[test]
    fn validate_buffer_carries_the_report() {
        let out = validate_buffer(SCHEMA, b"", b"{\"type\":\"P\",\"data\":{\"name\":\"a\"}}\n");
        assert_eq!(out[0], Status::Report as u8);
        assert!(out[1..].starts_with(b"{\"ok\":true"));
    }

    #[test]
    fn prepare_buffer_round_trips() {
        let batch = b"{\"type\":\"P\",\"data\":{\"name\":\"a\"}}\n";
        let buffer = prepare_buffer(SCHEMA, b"{}", batch);
        let decoded = decode_prepare(&buffer).unwrap();
        let schema = Schema::compile("node P { name: String @key }").unwrap();
        let (report, rows) = prepare_rows(&schema, &Options::default(), batch).unwrap();
        assert_eq!(decoded, PrepareOutcome::Accepted { report_json: report.to_json(), rows: &rows[..] });
        #[cfg(feature = "arrow")]
        assert_eq!(
            crate::tables_from_rows(&schema, &rows).unwrap(),
            crate::prepare(&schema, &Options::default(), batch).unwrap().into_tables()
        );
        assert!(matches!(decode_prepare(&prepare_buffer(SCHEMA, b"", b"{}\n")), Ok(PrepareOutcome::Rejected { .. })));
    }

    #[test]
    fn a_compiled_schema_gives_the_buffers_its_source_gives() {
        let compiled = compile_buffer(SCHEMA);
        assert_eq!(compiled[0], Status::Compiled as u8);
        let form = &compiled[1..];
        for (options, batch) in [(&b""[..], &b"{\"type\":\"P\",\"data\":{\"name\":\"a\"}}\n"[..]), (b"{\"mode\":\"append\"}", b"{}\n"), (b"{\"mode\":\"x\"}", b"")] {
            assert_eq!(validate_compiled_buffer(form, options, batch), validate_buffer(SCHEMA, options, batch));
            assert_eq!(prepare_compiled_buffer(form, options, batch), prepare_buffer(SCHEMA, options, batch));
        }
    }

    #[test]
    fn errors_are_typed() {
        assert!(matches!(decode_prepare(&prepare_buffer(b"node", b"", b"")), Ok(PrepareOutcome::SchemaError(e)) if e.contains("\"line\":1")));
        assert!(matches!(decode_prepare(&prepare_buffer(SCHEMA, b"{\"mode\":\"x\"}", b"")), Ok(PrepareOutcome::OptionsError(_))));
        assert_eq!(decode_prepare(&[]), Err(MalformedBuffer("empty")));
        assert!(matches!(decode_prepare(&prepare_compiled_buffer(b"not a form", b"", b"")), Ok(PrepareOutcome::CompiledFormError(e)) if e.contains("no header")));
        assert_eq!(compile_buffer(b"node")[0], Status::SchemaError as u8);
        assert_eq!(decode_prepare(&[b'1', 9, 0, 0, 0]), Err(MalformedBuffer("truncated")));
    }
}
