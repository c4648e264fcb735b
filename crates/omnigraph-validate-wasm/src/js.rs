//! The JavaScript API (wasm-bindgen): thin wrappers over the core. Batches
//! cross as bytes (`Uint8Array`), never as JS strings. More in lib.rs.

use std::cell::RefCell;

use wasm_bindgen::prelude::*;

use crate::{Options, Schema, Scratch};

/// A schema that failed to compile: every error with its line and column.
#[wasm_bindgen]
pub struct SchemaCompileError {
    errors: crate::SchemaErrors,
}

#[wasm_bindgen]
impl SchemaCompileError {
    /// Line of the first error (1-based).
    #[wasm_bindgen(getter)]
    pub fn line(&self) -> u32 {
        self.errors.errors.first().map_or(0, |e| e.line)
    }

    /// Column of the first error (1-based, in characters).
    #[wasm_bindgen(getter)]
    pub fn column(&self) -> u32 {
        self.errors.errors.first().map_or(0, |e| e.column)
    }

    /// All errors, one `line:column: message` per line.
    #[wasm_bindgen(getter)]
    pub fn message(&self) -> String {
        self.errors.to_string()
    }

    /// All errors as JSON: `{"errors":[{"line","column","message"}…]}`.
    #[wasm_bindgen(getter, js_name = errorsJson)]
    pub fn errors_json(&self) -> String {
        serde_json::to_string(&self.errors).expect("serializes")
    }
}

/// A compiled schema, reusable for many batches. Each validates in the
/// memory the last one left (its `Scratch`: the module's memory never
/// shrinks, so keeping it costs nothing and spares regrowing the maps).
#[wasm_bindgen]
pub struct CompiledSchema {
    schema: Schema,
    scratch: RefCell<Scratch>,
}

#[wasm_bindgen]
impl CompiledSchema {
    /// `sha256:…` of the canonical catalog (SPEC §1.5).
    #[wasm_bindgen(getter)]
    pub fn hash(&self) -> String {
        self.schema.hash().to_owned()
    }

    /// The canonical catalog JSON.
    #[wasm_bindgen(getter)]
    pub fn catalog(&self) -> String {
        self.schema.canonical_json().to_owned()
    }

    /// Validates `bytes` and returns the report JSON (SPEC §3).
    /// `options` is options JSON; omitted = defaults.
    pub fn validate(&self, bytes: &[u8], options: Option<String>) -> Result<String, JsError> {
        let options = parse_options(options)?;
        Ok(self.scratch.borrow_mut().validate(&self.schema, &options, bytes).to_json())
    }

    /// Like `validate`, but returns the report as a JS object (parsed inside
    /// the module; see docs/performance.md for which crossing is faster).
    #[wasm_bindgen(js_name = validateObject)]
    pub fn validate_object(&self, bytes: &[u8], options: Option<String>) -> Result<JsValue, JsError> {
        let json = self.validate(bytes, options)?;
        js_sys::JSON::parse(&json).map_err(|_| JsError::new("report is not JSON"))
    }
}

fn parse_options(options: Option<String>) -> Result<Options, JsError> {
    match options {
        None => Ok(Options::default()),
        Some(text) => Options::from_json(text.as_bytes()).map_err(|e| JsError::new(&e.to_string())),
    }
}

/// Compiles `.pg` source; throws a `SchemaCompileError` with line/column.
#[wasm_bindgen(js_name = compileSchema)]
pub fn compile_schema(source: &str) -> Result<CompiledSchema, SchemaCompileError> {
    Schema::compile(source)
        .map(|schema| CompiledSchema { schema, scratch: RefCell::default() })
        .map_err(|errors| SchemaCompileError { errors })
}

/// One-shot: compile `schema` and validate `bytes`; returns the report JSON.
#[wasm_bindgen]
pub fn validate(schema: &str, bytes: &[u8], options: Option<String>) -> Result<String, JsValue> {
    let compiled = compile_schema(schema).map_err(JsValue::from)?;
    compiled.validate(bytes, options).map_err(JsValue::from)
}

/// `{validator_version, abi_version}`: what a client reports to prove it
/// validates with the host's rules (with the artifact's SHA-256).
#[wasm_bindgen]
pub fn rules() -> JsValue {
    let json = format!(
        "{{\"validator_version\":\"{}\",\"abi_version\":{}}}",
        crate::VALIDATOR_VERSION,
        crate::abi::ABI_VERSION
    );
    // Not `expect`: formatting a JsValue would add an import to the module.
    js_sys::JSON::parse(&json).unwrap_or(JsValue::UNDEFINED)
}
