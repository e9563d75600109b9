//! libFuzzer target for the `p4db_log` decoder (see `pisadb_decoder_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| pisadb_decoder_fuzz::check_or_panic("p4db_log", input));
