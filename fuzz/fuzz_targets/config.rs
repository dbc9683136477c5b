//! Arbitrary text into the coordinator's configuration reader (TOML: cluster, queues and
//! their definitions, `owns`, policies, durations): nothing may panic, every error must
//! print, and a configuration it accepts must keep the invariants `config::check` states.
//!
//! A `[cluster] spec = "FILE"` names a file to read; such inputs are left out, so the
//! fuzzer reads no file (the inline cluster, `[cluster.inline]`, goes through the same
//! cluster reader).

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use shardsched_coordinator_core::config::{Config, check};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let names_a_file = toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|t| t.get("cluster")?.get("spec").cloned())
        .is_some();
    if names_a_file {
        return;
    }
    match Config::parse(text, "fuzz.toml", Path::new("/nonexistent")) {
        Ok(config) => {
            if let Err(broken) = check(&config) {
                panic!("an accepted configuration breaks its invariants: {broken}");
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
