//! Writes each fuzz target's seed corpus, derived from tests/vectors, to
//! `<dir>/<target>/<case>` (scripts/fuzz.sh calls this).

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("usage: write_seeds <corpus dir>"));
    for target in omnigraph_fuzz_harness::TARGETS {
        let target_dir = dir.join(target);
        std::fs::create_dir_all(&target_dir).expect("create corpus dir");
        let seeds = omnigraph_fuzz_harness::seeds(target);
        for (name, bytes) in &seeds {
            std::fs::write(target_dir.join(name), bytes).expect("write seed");
        }
        println!("{target}: {} seeds", seeds.len());
    }
}
