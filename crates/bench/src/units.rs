//! How figures read in text, for every report: counts with thousands separators, and
//! latencies in the unit that reads best.

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A latency in microseconds, in the unit that reads best (`245µs`, `2.96ms`, `1.20s`).
pub fn latency(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0}µs")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1000.0)
    } else {
        format!("{:.2}s", us / 1_000_000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_587_214), "1,587,214");
        assert_eq!(latency(245.0), "245µs");
        assert_eq!(latency(2960.0), "2.96ms");
        assert_eq!(latency(1_200_000.0), "1.20s");
    }
}
