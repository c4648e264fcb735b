//! OmniGraph ingest's commit host. Today: the validator runner (the wasm
//! artifact in wasmtime). The commit engine, HTTP API and CLI follow the
//! load's path: HTTP/CLI → validate (wasmtime) → stateful checks → stage →
//! commit/publish.

pub mod validator;
