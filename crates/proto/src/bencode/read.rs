//! A small, checked bencode reader: the one decoder of the project.
//!
//! shoal-bench reads tracker responses with it (it must not trust the tracker: checking
//! its answers is the point), and the tests and fuzz targets decode what the writer in
//! [`super`] wrote. So it is strict: canonical integers only, string lengths
//! checked against the input, a depth limit, and nothing left over at the end.
//! [`Value::is_canonical`] adds the rule that dictionary keys are sorted and unique (BEP 3),
//! which shoal's writer keeps and some other trackers do not. Values borrow from the input.

/// A bencoded value borrowing from the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Int(i64),
    Bytes(&'a [u8]),
    List(Vec<Value<'a>>),
    /// Keys in input order (bencode requires them sorted; not checked, trackers vary).
    Dict(Vec<(&'a [u8], Value<'a>)>),
}

impl<'a> Value<'a> {
    pub fn get(&self, key: &[u8]) -> Option<&Value<'a>> {
        match self {
            Value::Dict(d) => d.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }
    pub fn as_list(&self) -> Option<&[Value<'a>]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }
    pub fn as_dict(&self) -> Option<&[(&'a [u8], Value<'a>)]> {
        match self {
            Value::Dict(d) => Some(d),
            _ => None,
        }
    }
    /// Whether every dictionary in this value has its keys sorted and unique, as BEP 3
    /// asks of an encoder.
    pub fn is_canonical(&self) -> bool {
        match self {
            Value::Int(_) | Value::Bytes(_) => true,
            Value::List(l) => l.iter().all(Value::is_canonical),
            Value::Dict(d) => {
                d.windows(2).all(|w| w[0].0 < w[1].0) && d.iter().all(|(_, v)| v.is_canonical())
            }
        }
    }
}

const MAX_DEPTH: usize = 32;

/// Parses exactly one value filling all of `input`.
pub fn parse(input: &[u8]) -> Option<Value<'_>> {
    let (v, rest) = value(input, 0)?;
    rest.is_empty().then_some(v)
}

fn value(input: &[u8], depth: usize) -> Option<(Value<'_>, &[u8])> {
    if depth > MAX_DEPTH {
        return None;
    }
    match *input.first()? {
        b'i' => {
            let end = input.iter().position(|&c| c == b'e')?;
            let digits = &input[1..end];
            let s = std::str::from_utf8(digits).ok()?;
            // Canonical: no "-0", no leading zeros, not empty.
            let body = s.strip_prefix('-').unwrap_or(s);
            if body.is_empty()
                || !body.bytes().all(|c| c.is_ascii_digit())
                || (body.len() > 1 && body.starts_with('0'))
                || s == "-0"
            {
                return None;
            }
            Some((Value::Int(s.parse().ok()?), &input[end + 1..]))
        }
        b'l' => {
            let (items, rest) = items(&input[1..], |r| value(r, depth + 1))?;
            Some((Value::List(items), rest))
        }
        b'd' => {
            let (items, rest) = items(&input[1..], |r| {
                let (k, r) = bytes(r)?;
                let (v, r) = value(r, depth + 1)?;
                Some(((k, v), r))
            })?;
            Some((Value::Dict(items), rest))
        }
        b'0'..=b'9' => {
            let (b, r) = bytes(input)?;
            Some((Value::Bytes(b), r))
        }
        _ => None,
    }
}

/// Reads the items of a list or dictionary with `item` up to its closing `e`, and returns
/// them with what follows the `e`.
fn items<'a, T>(
    mut rest: &'a [u8],
    mut item: impl FnMut(&'a [u8]) -> Option<(T, &'a [u8])>,
) -> Option<(Vec<T>, &'a [u8])> {
    let mut items = Vec::new();
    while *rest.first()? != b'e' {
        let (v, r) = item(rest)?;
        items.push(v);
        rest = r;
    }
    Some((items, &rest[1..]))
}

fn bytes(input: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = input.iter().take(12).position(|&c| c == b':')?;
    let len_digits = &input[..colon];
    if len_digits.is_empty()
        || !len_digits.iter().all(u8::is_ascii_digit)
        || (len_digits.len() > 1 && len_digits[0] == b'0')
    {
        return None;
    }
    let len: usize = std::str::from_utf8(len_digits).ok()?.parse().ok()?;
    let start = colon + 1;
    let end = start.checked_add(len)?;
    Some((input.get(start..end)?, &input[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announce_response() {
        let body =
            b"d8:completei3e10:incompletei1e8:intervali1800e5:peers6:\x7f\x00\x00\x01\x1a\xe1e";
        let v = parse(body).unwrap();
        assert_eq!(v.get(b"interval").unwrap().as_int(), Some(1800));
        assert_eq!(v.get(b"peers").unwrap().as_bytes().unwrap().len(), 6);
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            &b"i-0e"[..],
            b"i03e",
            b"ie",
            b"5:abc",
            b"d3:abci1e",
            b"li1e",
            b"i1ei2e",
            b"01:a",
            b"x",
            b"",
        ] {
            assert_eq!(parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        let deep = format!("{}{}", "l".repeat(100), "e".repeat(100));
        assert_eq!(parse(deep.as_bytes()), None);
    }

    #[test]
    fn canonical_means_sorted_unique_keys() {
        assert!(parse(b"d1:ai1e1:bli1eee").unwrap().is_canonical());
        assert!(!parse(b"d1:bi1e1:ai1ee").unwrap().is_canonical());
        assert!(!parse(b"d1:ai1e1:ai2ee").unwrap().is_canonical());
        assert!(!parse(b"ld1:bi1e1:ai1eee").unwrap().is_canonical());
    }

    #[test]
    fn nested() {
        let v = parse(b"d5:filesd3:abcd8:completei1eeee").unwrap();
        let files = v.get(b"files").unwrap();
        assert_eq!(
            files.get(b"abc").unwrap().get(b"complete"),
            Some(&Value::Int(1))
        );
    }
}
