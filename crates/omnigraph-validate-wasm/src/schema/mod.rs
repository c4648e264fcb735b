//! The schema language (SPEC §1): `.pg` source → compiled [`Schema`] with a
//! canonical catalog and its hash.

mod catalog;
mod compile;
mod lexer;
mod parser;

use std::collections::HashMap;

use regex::Regex;
use serde::Serialize;

pub use catalog::{Catalog, CatalogAnnotation, CatalogCard, CatalogCheck, CatalogProp, CatalogRange, CatalogType};

use crate::report::TableKind;

/// Names no property or envelope member may use: the envelope's columns and
/// Lance's system columns (SPEC §1.4).
pub const RESERVED_NAMES: [&str; 9] = [
    "_id",
    "_src",
    "_dst",
    "_rowid",
    "_rowaddr",
    "_rowoffset",
    "_row_created_at_version",
    "_row_last_updated_at_version",
    "_tombstone",
];

pub fn is_reserved(name: &str) -> bool {
    RESERVED_NAMES.contains(&name)
}

/// One schema error, with a 1-based line and column (in characters).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct SchemaError {
    pub line: u32,
    pub column: u32,
    pub message: String,
}

impl SchemaError {
    pub(crate) fn at(span: lexer::Span, message: impl Into<String>) -> Self {
        SchemaError { line: span.line, column: span.column, message: message.into() }
    }
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// Every error found in a schema, ordered by position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaErrors {
    pub errors: Vec<SchemaError>,
}

impl std::fmt::Display for SchemaErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (n, e) in self.errors.iter().enumerate() {
            if n > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SchemaErrors {}

/// The value types of SPEC §1.3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueType {
    String,
    Bool,
    I32,
    I64,
    U32,
    U64,
    F32,
    F64,
    Date,
    DateTime,
    Blob,
    /// `Vector(n)`: exactly n finite Float32 values.
    Vector(u32),
    /// `enum(a, b, …)`, values in written order.
    Enum(Vec<String>),
    /// `[T]`: T is neither a list, a vector nor a blob; items are never null.
    List(Box<ValueType>),
}

impl ValueType {
    /// The canonical spelling used in the catalog and in messages.
    pub fn canonical(&self) -> String {
        match self {
            ValueType::String => "String".into(),
            ValueType::Bool => "Bool".into(),
            ValueType::I32 => "I32".into(),
            ValueType::I64 => "I64".into(),
            ValueType::U32 => "U32".into(),
            ValueType::U64 => "U64".into(),
            ValueType::F32 => "F32".into(),
            ValueType::F64 => "F64".into(),
            ValueType::Date => "Date".into(),
            ValueType::DateTime => "DateTime".into(),
            ValueType::Blob => "Blob".into(),
            ValueType::Vector(n) => format!("Vector({n})"),
            ValueType::Enum(values) => format!("enum({})", values.join(", ")),
            ValueType::List(item) => format!("[{}]", item.canonical()),
        }
    }

    pub fn is_integer(&self) -> bool {
        matches!(self, ValueType::I32 | ValueType::I64 | ValueType::U32 | ValueType::U64)
    }

    pub fn is_float(&self) -> bool {
        matches!(self, ValueType::F32 | ValueType::F64)
    }

    /// Scalars can be keys: not a list, vector or blob.
    pub fn is_scalar(&self) -> bool {
        !matches!(self, ValueType::List(_) | ValueType::Vector(_) | ValueType::Blob)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PropDef {
    pub name: String,
    pub ty: ValueType,
    pub nullable: bool,
}

/// A member of a `@unique` tuple: a property, or (on edges) an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UniqueMember {
    Prop(usize),
    Src,
    Dst,
}

/// A `@range` bound, typed like its property so comparison is exact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    Int(i128),
    Float(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RangeRule {
    pub prop: usize,
    pub min: Option<Bound>,
    pub max: Option<Bound>,
    /// The bounds as written in the catalog, for messages.
    pub text: String,
}

#[derive(Debug, Clone)]
pub struct CheckRule {
    pub prop: usize,
    pub regex: Regex,
}

/// A stored node or edge type, ready for validation.
#[derive(Debug, Clone)]
pub struct TypeDef {
    pub kind: TableKind,
    pub name: String,
    pub props: Vec<PropDef>,
    pub prop_index: HashMap<String, usize>,
    /// Key properties in `@key(…)` order (nodes only).
    pub key: Option<Vec<usize>>,
    pub uniques: Vec<Vec<UniqueMember>>,
    pub ranges: Vec<RangeRule>,
    pub checks: Vec<CheckRule>,
    /// `@card` maximum edges per source node (edges only).
    pub card_max: Option<u64>,
    /// Endpoint node types, as indexes into [`Schema::types`] (edges only).
    pub from: Option<usize>,
    pub to: Option<usize>,
}

impl TypeDef {
    pub fn prop(&self, name: &str) -> Option<usize> {
        self.prop_index.get(name).copied()
    }
}

/// A compiled schema. Types are ordered nodes first, then edges, each by name.
#[derive(Debug, Clone)]
pub struct Schema {
    pub types: Vec<TypeDef>,
    by_name: HashMap<String, usize>,
    interfaces: Vec<String>,
    catalog: Catalog,
    canonical: String,
    hash: String,
}

impl Schema {
    /// Compiles `.pg` source. Every `@check` regex is compiled here.
    pub fn compile(source: &str) -> Result<Schema, SchemaErrors> {
        compile::compile(source)
    }

    pub fn type_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    pub fn is_interface(&self, name: &str) -> bool {
        self.interfaces.iter().any(|i| i == name)
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The catalog's canonical JSON (SPEC §1.5).
    pub fn canonical_json(&self) -> &str {
        &self.canonical
    }

    /// `sha256:<hex>` of [`Schema::canonical_json`].
    pub fn hash(&self) -> &str {
        &self.hash
    }
}
