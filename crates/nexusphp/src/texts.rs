//! The texts NexusPHP's clients see, as the `&'static str` the core's [`Refusal`] carries.
//!
//! Most are fixed; some carry a value (a port, a family's name, the site's address, a
//! slot count). Those are made once and kept ([`Texts::intern`]): the values they can take
//! are few (the blacklisted ports, the families, four slot counts, the settings), so what
//! is kept stays small however many announces ask.
//!
//! [`Refusal`]: shoal_tracker::site::Refusal

use std::collections::HashSet;

use parking_lot::Mutex;

/// The texts made so far.
#[derive(Debug, Default)]
pub struct Texts {
    made: Mutex<HashSet<&'static str>>,
}

impl Texts {
    /// `text` as a `&'static str`, made once per distinct text.
    pub fn intern(&self, text: String) -> &'static str {
        let mut made = self.made.lock();
        if let Some(t) = made.get(text.as_str()) {
            return t;
        }
        let t: &'static str = Box::leak(text.into_boxed_str());
        made.insert(t);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_made_once() {
        let texts = Texts::default();
        let a = texts.intern("Port 6881 is blacklisted.".to_owned());
        let b = texts.intern("Port 6881 is blacklisted.".to_owned());
        assert!(std::ptr::eq(a, b));
    }
}
