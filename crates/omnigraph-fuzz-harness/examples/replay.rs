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
    let mut ran = 0;
    for path in omnigraph_fuzz_harness::input_files(dir.as_ref()) {
        let data = std::fs::read(&path).expect("readable input");
        omnigraph_fuzz_harness::run(&target, &data);
        ran += 1;
    }
    println!("{target}: {ran} inputs from {dir} pass");
}
