//! One line of an access-list pipe (`[access_list] fifo_add`, `fifo_delete`; opentracker's
//! `access.fifo_add`, `access.fifo_delete`): a hex info hash.
//!
//! As in opentracker, a line is taken when it starts with 40 hex digits followed by the end
//! of the line or by something that is not a hex digit (the rest is ignored, so `HASH
//! comment` works); anything else is skipped. Blank lines and `#` comments are skipped
//! without complaint; other skipped lines are reported so the server can log them.

/// What one line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// An info hash.
    Hash([u8; 20]),
    /// A blank line or a comment.
    Blank,
    /// Not an info hash.
    Bad,
}

/// Cuts what a pipe gives into lines, whatever the reads' sizes. A line longer than its
/// limit is cut there (an info hash and a comment fit easily; a runaway writer does not
/// grow the buffer).
pub struct Lines {
    line: Vec<u8>,
    max: usize,
}

impl Lines {
    pub fn new(max: usize) -> Self {
        Self {
            line: Vec::with_capacity(64),
            max,
        }
    }

    /// Takes `bytes` and calls `each` with every line they complete (without its `\n`).
    pub fn feed(&mut self, bytes: &[u8], mut each: impl FnMut(&[u8])) {
        for &b in bytes {
            if b == b'\n' {
                each(&self.line);
                self.line.clear();
            } else if self.line.len() < self.max {
                self.line.push(b);
            }
        }
    }
}

/// Reads one line (with or without its line break).
pub fn parse_line(line: &[u8]) -> Line {
    let line = line.trim_ascii();
    if crate::says_nothing(line) {
        return Line::Blank;
    }
    if line.len() < 40 || line.get(40).is_some_and(u8::is_ascii_hexdigit) {
        return Line::Bad;
    }
    let mut hash = [0u8; 20];
    for (byte, pair) in hash.iter_mut().zip(line[..40].chunks_exact(2)) {
        match crate::hex_byte(pair) {
            Some(b) => *byte = b,
            None => return Line::Bad,
        }
    }
    Line::Hash(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_hashes_are_read_in_either_case() {
        let want = Line::Hash([0xab; 20]);
        assert_eq!(
            parse_line(b"abababababababababababababababababababab\n"),
            want
        );
        assert_eq!(
            parse_line(b"ABABABABABABABABABABABABABABABABABABABAB"),
            want
        );
        assert_eq!(
            parse_line(b"  abababababababababababababababababababab \r\n"),
            want
        );
        assert_eq!(
            parse_line(b"abababababababababababababababababababab # dmca 17"),
            want
        );
        assert_eq!(
            parse_line(b"abababababababababababababababababababab:x"),
            want
        );
    }

    #[test]
    fn lines_are_cut_whatever_the_reads() {
        let mut lines = Lines::new(4);
        let mut got = Vec::new();
        for chunk in [&b"ab"[..], b"c\nd", b"efgh\n\n"] {
            lines.feed(chunk, |l| got.push(l.to_vec()));
        }
        assert_eq!(got, [b"abc".to_vec(), b"defg".to_vec(), Vec::new()]);
    }

    #[test]
    fn other_lines_are_skipped() {
        assert_eq!(parse_line(b"\n"), Line::Blank);
        assert_eq!(parse_line(b"# a comment"), Line::Blank);
        assert_eq!(parse_line(b"abab"), Line::Bad);
        assert_eq!(
            parse_line(b"abababababababababababababababababababa"),
            Line::Bad
        );
        assert_eq!(
            parse_line(b"ababababababababababababababababababababa"),
            Line::Bad
        );
        assert_eq!(
            parse_line(b"zbababababababababababababababababababab"),
            Line::Bad
        );
        assert_eq!(parse_line("é".repeat(20).as_bytes()), Line::Bad);
    }
}
