//! The compiled catalog in its canonical JSON form (SPEC §1.5). Field order
//! is the struct order; types are sorted by name; nothing positional (lines,
//! columns) is included, so whitespace and comments never change the hash.
//! It is complete: a compiled schema is rebuilt from it (`compiled.rs`).

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Catalog {
    /// Version of this JSON form.
    pub format: u32,
    pub interfaces: Vec<CatalogType>,
    pub nodes: Vec<CatalogType>,
    pub edges: Vec<CatalogType>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogType {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    pub implements: Vec<String>,
    pub properties: Vec<CatalogProp>,
    pub key: Option<Vec<String>>,
    pub unique: Vec<Vec<String>>,
    pub index: Vec<Vec<String>>,
    pub ranges: Vec<CatalogRange>,
    pub checks: Vec<CatalogCheck>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<CatalogCard>,
    pub metadata: Vec<CatalogAnnotation>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogProp {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    pub nullable: bool,
    pub metadata: Vec<CatalogAnnotation>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogRange {
    pub property: String,
    pub min: Option<String>,
    pub max: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogCheck {
    pub property: String,
    pub pattern: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogCard {
    pub min: u64,
    pub max: Option<u64>,
}

/// A metadata annotation (`@description`, `@embed`, unknown ones…) with its
/// arguments rendered as text (`lo..hi` for ranges).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogAnnotation {
    pub name: String,
    pub args: Option<Vec<String>>,
}
