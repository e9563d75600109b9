//! libFuzzer target for the `switchtx_log` decoder (see `pisadb_decoder_fuzz::targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| pisadb_decoder_fuzz::check_or_panic("switchtx_log", input));
