#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| omnigraph_fuzz_harness::run("differential", data));
