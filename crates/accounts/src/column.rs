//! The values as the columns hold them: 20-byte hashes, counters that are unsigned in shoal
//! and signed 64-bit in every dialect, Unix-second times, and the checks a site's value passes
//! before it is stored (so a bad passkey or factor is a clear refusal, not a driver error).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::Error;
use crate::model::InfoHashBytes;

/// A struct literal read from a database row: each field named before the `;` is the row's
/// column of the same name (a decoding error returns through `?`); those after it are given
/// as in any struct literal. The caller has `sqlx::Row` in scope.
///
/// `from_columns!(row => Group { slug, is_immune; id, download_slots: None })`
#[macro_export]
macro_rules! from_columns {
    ($row:expr => $ty:ident { $($column:ident),* $(,)? $(; $($field:ident $(: $value:expr)?),* $(,)?)? }) => {
        $ty {
            $($column: $row.try_get(stringify!($column))?,)*
            $($($field $(: $value)?,)*)?
        }
    };
}

/// A stored hash as the 20 bytes it must be.
pub fn info_hash(bytes: Vec<u8>) -> Result<InfoHashBytes, Error> {
    let length = bytes.len();
    bytes
        .try_into()
        .map_err(|_| Error::Corrupt(format!("an info hash of {length} bytes, not 20")))
}

/// A stored counter as the unsigned number it must be.
pub fn count(column: &str, value: i64) -> Result<u64, Error> {
    u64::try_from(value).map_err(|_| Error::Corrupt(format!("{column} = {value}, below zero")))
}

/// A counter as the database stores it: signed 64 bits (beyond 8 EiB it saturates).
pub fn stored(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Refuses a passkey or prefix that is empty, longer than `max` or not ASCII.
pub fn check_text(what: &str, text: &str, max: usize) -> Result<(), Error> {
    if text.is_empty() || text.len() > max || !text.is_ascii() {
        return Err(Error::Invalid(format!(
            "a {what} must be 1 to {max} ASCII characters"
        )));
    }
    Ok(())
}

/// Refuses a factor that is negative, infinite or not a number.
pub fn check_factor(factor: f64) -> Result<(), Error> {
    if !(factor.is_finite() && factor >= 0.0) {
        return Err(Error::Invalid(format!(
            "a factor must be a finite number, 0 or more (not {factor})"
        )));
    }
    Ok(())
}

/// Now, in Unix seconds.
pub fn unix_now() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    stored(since.as_secs())
}

#[cfg(test)]
mod tests {
    use super::{check_factor, check_text, count, stored};

    #[test]
    fn bad_settings_are_refused_before_the_database() {
        assert!(check_text("passkey", "", 64).is_err());
        assert!(check_text("passkey", &"a".repeat(65), 64).is_err());
        assert!(check_text("passkey", "pässkey", 64).is_err());
        assert!(check_text("passkey", "0123abcd", 64).is_ok());
        assert!(check_factor(f64::NAN).is_err());
        assert!(check_factor(-1.0).is_err());
        assert!(check_factor(0.0).is_ok());
    }

    #[test]
    fn counters_saturate_going_in_and_refuse_negatives_coming_out() {
        assert_eq!(stored(u64::MAX), i64::MAX);
        assert_eq!(stored(5), 5);
        assert_eq!(count("uploaded", 5).unwrap(), 5);
        assert!(count("uploaded", -1).is_err());
    }
}
