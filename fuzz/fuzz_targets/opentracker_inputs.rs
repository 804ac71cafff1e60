//! Fuzzes what shoal reads in opentracker's forms from outside: a `/stats` query (any
//! client in `[stats] allow` sends one), a line of an access-list pipe (anyone who may
//! write the pipe) and an `opentracker.conf` (convert-config). Each must give a value or
//! an error, never a panic; what parses must hold up: a pipe line's hash is its first 40
//! hex digits, and a converted config is TOML that names every line it did not map.
#![forbid(unsafe_code)]
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_opentracker::fifo::{parse_line, Line, Lines};
use shoal_opentracker::{conf, convert, query};

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = query::parse(data) {
        assert!(!req.mode.keyword().is_empty());
    }

    let mut lines = Lines::new(1024);
    lines.feed(data, |line| {
        assert!(line.len() <= 1024);
        if let Line::Hash(h) = parse_line(line) {
            let text = String::from_utf8_lossy(line.trim_ascii());
            let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
            assert!(text[..40].eq_ignore_ascii_case(&hex), "{text:?}");
        }
    });

    let text = String::from_utf8_lossy(data);
    let entries = conf::parse(&text);
    let toml = convert::to_toml(&text, "fuzz.conf");
    for e in entries.iter().filter(|e| e.directive.is_err()) {
        assert!(toml.contains(&format!("line {}: `", e.line)), "line {} not named", e.line);
    }
});
