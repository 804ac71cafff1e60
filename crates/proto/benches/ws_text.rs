//! What checking a WebTorrent message's UTF-8 costs, with the standard library's
//! `str::from_utf8` (what tungstenite runs on every text message a server receives) and
//! with `simdutf8` (what some other WebSocket crates run); then what parsing it costs:
//! every offer read (`ws::parse_text`), and as the tracker parses it
//! (`ws::parse_text_within`: no more offers kept than the connection has places for their
//! answers, and an offer read only when it finds a peer to go to).
//!
//! The messages are announces as `aquatic_ws_load_test` sends them: ten offers, each with
//! a 20-byte offer id, and the info hash and peer id, all written as JSON strings of one
//! character per byte (WebTorrent's binary strings), so every byte from 0x80 up is two
//! bytes of UTF-8 and the text is far from ASCII. `cargo bench -p shoal-proto --bench
//! ws_text`

#![forbid(unsafe_code)]

use criterion::{criterion_group, criterion_main, Criterion};

/// `n` random bytes as a JSON string body: one character per byte, controls escaped.
fn binary_string(rng: &mut fastrand::Rng, n: usize) -> String {
    let mut s = String::new();
    for _ in 0..n {
        match char::from(rng.u8(..)) {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if u32::from(c) < 0x20 => s.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => s.push(c),
        }
    }
    s
}

fn announce(rng: &mut fastrand::Rng) -> Vec<u8> {
    let offers: Vec<String> = (0..10)
        .map(|_| {
            format!(
                r#"{{"offer_id":"{}","offer":{{"type":"offer","sdp":"abcdefg-abcdefg-abcdefg-abcdefg-abcdefg-abcdefg"}}}}"#,
                binary_string(rng, 20)
            )
        })
        .collect();
    format!(
        r#"{{"action":"announce","info_hash":"{}","peer_id":"{}","bytes_left":0,"event":"completed","numwant":10,"offers":[{}]}}"#,
        binary_string(rng, 20),
        binary_string(rng, 20),
        offers.join(",")
    )
    .into_bytes()
}

fn bench(c: &mut Criterion) {
    let mut rng = fastrand::Rng::with_seed(7);
    let messages: Vec<Vec<u8>> = (0..1024).map(|_| announce(&mut rng)).collect();
    let bytes: usize = messages.iter().map(Vec::len).sum();
    eprintln!(
        "{} announces, {} bytes each on average",
        messages.len(),
        bytes / messages.len()
    );
    let mut i = 0;
    c.bench_function("announce text, std::str::from_utf8", |b| {
        b.iter(|| {
            i = (i + 1) % messages.len();
            std::str::from_utf8(std::hint::black_box(&messages[i])).is_ok()
        })
    });
    let mut i = 0;
    c.bench_function("announce text, simdutf8::basic::from_utf8", |b| {
        b.iter(|| {
            i = (i + 1) % messages.len();
            simdutf8::basic::from_utf8(std::hint::black_box(&messages[i])).is_ok()
        })
    });
    let texts: Vec<&str> = messages
        .iter()
        .map(|m| std::str::from_utf8(m).unwrap())
        .collect();
    let mut i = 0;
    c.bench_function("announce text, parse_text", |b| {
        b.iter(|| {
            i = (i + 1) % texts.len();
            shoal_proto::ws::parse_text(std::hint::black_box(texts[i])).is_ok()
        })
    });
    for max in [0, 10] {
        let mut i = 0;
        c.bench_function(
            &format!("announce text, parse_text_within {max} offers kept, none read"),
            |b| {
                b.iter(|| {
                    i = (i + 1) % texts.len();
                    shoal_proto::ws::parse_text_within(std::hint::black_box(texts[i]), || max)
                        .is_ok()
                })
            },
        );
    }
    let mut i = 0;
    c.bench_function(
        "announce text, parse_text_within 10 offers kept, one read",
        |b| {
            b.iter(|| {
                i = (i + 1) % texts.len();
                match shoal_proto::ws::parse_text_within(std::hint::black_box(texts[i]), || 10) {
                    Ok(shoal_proto::ws::Request::Announce(a)) => a.offers[0].read().is_ok(),
                    _ => false,
                }
            })
        },
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
