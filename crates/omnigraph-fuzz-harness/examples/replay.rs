//! Runs every file of a directory through a fuzz target's body, e.g. a
//! whole corpus the fuzzer grew: `replay prepare fuzz/corpus/prepare`. Built
//! without `-O`, this re-checks the inputs with overflow checks and debug
//! assertions on, which the optimised fuzzing build leaves off.

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(target), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: replay <target> <dir>");
        std::process::exit(2);
    };
    let (mut ran, mut vanished) = (0, 0);
    for path in omnigraph_fuzz_harness::input_files(dir.as_ref()) {
        // A fuzzer running on the corpus may remove a file it reduced
        // between the listing and the read.
        let data = match std::fs::read(&path) {
            Ok(data) => data,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                vanished += 1;
                continue;
            }
            Err(e) => panic!("{}: {e}", path.display()),
        };
        omnigraph_fuzz_harness::run(&target, &data);
        ran += 1;
    }
    println!("{target}: {ran} inputs from {dir} pass ({vanished} removed while replaying)");
}
