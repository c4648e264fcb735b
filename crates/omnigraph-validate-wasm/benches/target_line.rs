//! The line every benchmark ends with, one per goal:
//! `target <name> <measured> <goal> <met|not met>`. Shared by the
//! validator's and the host's benches (the host's through `#[path]`).

#![allow(dead_code)] // each bench uses its own part

/// A ceiling target: met when `measured <= goal`.
pub fn target(name: &str, measured: f64, goal: f64) -> String {
    line(name, measured, goal, measured <= goal)
}

/// A floor target: met when `measured >= goal`.
pub fn target_at_least(name: &str, measured: f64, goal: f64) -> String {
    line(name, measured, goal, measured >= goal)
}

fn line(name: &str, measured: f64, goal: f64, met: bool) -> String {
    format!("target {name} {measured:.2} {goal} {}", if met { "met" } else { "not met" })
}
