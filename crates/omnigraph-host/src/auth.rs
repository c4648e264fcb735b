//! Bearer-token authentication and per-graph authorization (SPEC §6): a
//! token, compared by its SHA-256 digest in constant time, maps to an actor
//! and per-graph grants.
//!
//! The config file (TOML) stores SHA-256 digests of tokens, never tokens:
//!
//! ```toml
//! [[token]]
//! actor = "loader"
//! sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! graphs = { demo = ["read", "change", "branch_create"], "*" = ["read"] }
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// What an actor may do on a graph. `admin` implies the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    Read,
    Change,
    BranchCreate,
    Admin,
}

impl Permission {
    pub fn parse(name: &str) -> Option<Permission> {
        [Permission::Read, Permission::Change, Permission::BranchCreate, Permission::Admin].into_iter().find(|p| p.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::Change => "change",
            Permission::BranchCreate => "branch_create",
            Permission::Admin => "admin",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    actor: String,
    /// Lowercase hex SHA-256 of the token.
    sha256: String,
    graphs: Grants,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthFile {
    #[serde(default)]
    token: Vec<TokenEntry>,
}

/// A token's permissions: graph id (or `*` for every graph) → permissions.
pub type Grants = BTreeMap<String, Vec<Permission>>;

/// Who may do what.
#[derive(Debug, Clone)]
pub enum Auth {
    /// Local development: every request is the actor `anonymous` with every
    /// permission.
    Open,
    /// Default deny: only listed tokens, only their grants.
    Tokens(Vec<([u8; 32], String, Grants)>),
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub name: String,
    grants: Option<Grants>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// 401: no token, a malformed header or an unknown token.
    Unauthenticated,
    /// 403: the actor lacks the permission on this graph.
    Forbidden { actor: String, permission: Permission },
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of a digest (file, artifact and compiled-module names).
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex32(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl Auth {
    /// Parses the TOML config. Errors name the problem, never a digest.
    pub fn from_toml(text: &str) -> Result<Auth, String> {
        let file: AuthFile = toml::from_str(text).map_err(|e| format!("auth config: {e}"))?;
        let mut tokens = Vec::with_capacity(file.token.len());
        for entry in file.token {
            let digest = parse_hex32(&entry.sha256)
                .ok_or_else(|| format!("auth config: token of actor {:?}: sha256 must be 64 hex digits", entry.actor))?;
            tokens.push((digest, entry.actor, entry.graphs));
        }
        Ok(Auth::Tokens(tokens))
    }

    /// Resolves the `Authorization` header's value. Every configured digest
    /// is compared in constant time, whatever matches.
    pub fn authenticate(&self, header: Option<&[u8]>) -> Result<Actor, AuthError> {
        let tokens = match self {
            Auth::Open => return Ok(Actor { name: "anonymous".into(), grants: None }),
            Auth::Tokens(tokens) => tokens,
        };
        let token = header.and_then(|h| h.strip_prefix(b"Bearer ")).ok_or(AuthError::Unauthenticated)?;
        let digest: [u8; 32] = Sha256::digest(token).into();
        let mut found = None;
        for (stored, actor, grants) in tokens {
            if bool::from(stored.ct_eq(&digest)) && found.is_none() {
                found = Some(Actor { name: actor.clone(), grants: Some(grants.clone()) });
            }
        }
        found.ok_or(AuthError::Unauthenticated)
    }
}

impl Actor {
    pub fn allows(&self, graph: &str, permission: Permission) -> bool {
        let Some(grants) = &self.grants else { return true };
        [graph, "*"].iter().filter_map(|g| grants.get(*g)).flatten().any(|p| *p == permission || *p == Permission::Admin)
    }

    pub fn require(&self, graph: &str, permission: Permission) -> Result<(), AuthError> {
        if self.allows(graph, permission) {
            Ok(())
        } else {
            Err(AuthError::Forbidden { actor: self.name.clone(), permission })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Auth {
        Auth::from_toml(&format!(
            "[[token]]\nactor = \"loader\"\nsha256 = \"{}\"\ngraphs = {{ demo = [\"change\"], \"*\" = [\"read\"] }}\n\
             [[token]]\nactor = \"root\"\nsha256 = \"{}\"\ngraphs = {{ \"*\" = [\"admin\"] }}\n",
            sha256_hex(b"s3cret"),
            sha256_hex(b"r00t")
        ))
        .unwrap()
    }

    #[test]
    fn tokens_map_to_actors_and_grants() {
        let auth = config();
        let loader = auth.authenticate(Some(b"Bearer s3cret")).unwrap();
        assert_eq!(loader.name, "loader");
        assert!(loader.allows("demo", Permission::Change) && loader.allows("other", Permission::Read));
        assert!(!loader.allows("other", Permission::Change) && !loader.allows("demo", Permission::BranchCreate));
        assert!(auth.authenticate(Some(b"Bearer r00t")).unwrap().allows("x", Permission::BranchCreate));
        for bad in [None, Some(&b"Bearer nope"[..]), Some(b"s3cret"), Some(b"Basic s3cret")] {
            assert_eq!(auth.authenticate(bad), Err(AuthError::Unauthenticated));
        }
        assert!(Auth::Open.authenticate(None).unwrap().allows("any", Permission::Admin));
    }

    #[test]
    fn bad_configs_are_refused() {
        assert!(Auth::from_toml("[[token]]\nactor = \"a\"\nsha256 = \"xyz\"\ngraphs = {}\n").unwrap_err().contains("64 hex"));
        assert!(Auth::from_toml("[[token]]\nactor = \"a\"\nsha256 = \"00\"\ngraphs = { g = [\"fly\"] }\n").is_err());
    }
}
