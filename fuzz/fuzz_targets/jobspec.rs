//! Arbitrary text into the jobspec parser (what `submit` reads from a file and what a
//! shard decodes from a client): YAML and JSON both, whatever the text looks like. Nothing
//! may panic or run out of stack (the depth limits), and every error must print.

#![no_main]

use libfuzzer_sys::fuzz_target;
use shardsched_jobspec::{parse, parse_json, parse_yaml};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for parsed in [parse(text), parse_yaml(text), parse_json(text)] {
        if let Err(e) = parsed {
            let _ = e.to_string();
        }
    }
});
