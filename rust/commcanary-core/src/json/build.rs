//! A small owned JSON value for documents assembled in code (diagnosis
//! reports), written as canonical JSON v1 by [`Json::to_canonical`].
//!
//! Invariants: object members are kept in a `BTreeMap`, so keys come out
//! sorted by their UTF-8 bytes, which is the canonical order for the ASCII
//! keys these documents use; a non-finite float is written as `null` (the
//! canonical form has no `NaN`).

use std::collections::BTreeMap;

use super::canon::{write_f64, write_i64, write_str};
use super::{CLOSE_BRACE, OPEN_BRACE};

/// An owned JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float (`NaN` and infinities are written as `null`).
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    Array(Vec<Json>),
    /// An object.
    Object(BTreeMap<String, Json>),
}

impl Json {
    /// An empty object.
    #[must_use]
    pub fn object() -> Self {
        Json::Object(BTreeMap::new())
    }

    /// Sets `key` on an object (no effect on other values); returns `self`.
    #[must_use]
    pub fn with(mut self, key: &str, value: impl Into<Json>) -> Self {
        self.set(key, value);
        self
    }

    /// Sets `key` on an object (no effect on other values).
    pub fn set(&mut self, key: &str, value: impl Into<Json>) {
        if let Json::Object(m) = self {
            m.insert(key.to_owned(), value.into());
        }
    }

    /// Canonical JSON v1 bytes.
    #[must_use]
    pub fn to_canonical(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Json::Null => out.extend_from_slice(b"null"),
            Json::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Json::Int(i) => write_i64(out, *i),
            Json::Float(x) if x.is_finite() => write_f64(out, *x),
            Json::Float(_) => out.extend_from_slice(b"null"),
            Json::Str(s) => write_str(out, s),
            Json::Array(items) => {
                out.push(b'[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    v.write(out);
                }
                out.push(b']');
            }
            Json::Object(members) => {
                out.push(OPEN_BRACE);
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_str(out, k);
                    out.push(b':');
                    v.write(out);
                }
                out.push(CLOSE_BRACE);
            }
        }
    }
}

impl From<bool> for Json {
    fn from(v: bool) -> Self {
        Json::Bool(v)
    }
}
impl From<i64> for Json {
    fn from(v: i64) -> Self {
        Json::Int(v)
    }
}
impl From<u64> for Json {
    fn from(v: u64) -> Self {
        Json::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<usize> for Json {
    fn from(v: usize) -> Self {
        Json::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<f64> for Json {
    fn from(v: f64) -> Self {
        Json::Float(v)
    }
}
impl From<&str> for Json {
    fn from(v: &str) -> Self {
        Json::Str(v.to_owned())
    }
}
impl From<String> for Json {
    fn from(v: String) -> Self {
        Json::Str(v)
    }
}
impl From<Vec<Json>> for Json {
    fn from(v: Vec<Json>) -> Self {
        Json::Array(v)
    }
}
impl From<&[i64]> for Json {
    fn from(v: &[i64]) -> Self {
        Json::Array(v.iter().map(|&i| Json::Int(i)).collect())
    }
}
impl<T: Into<Json>> From<Option<T>> for Json {
    fn from(v: Option<T>) -> Self {
        v.map_or(Json::Null, Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::Json;

    #[test]
    fn writes_sorted_canonical_json() {
        let j = Json::object()
            .with("b", 1_i64)
            .with(
                "a",
                vec![Json::from(0.5), Json::from("x\u{e9}"), Json::Null],
            )
            .with("c", f64::NAN)
            .with("d", Some(true));
        assert_eq!(
            String::from_utf8(j.to_canonical()).unwrap(),
            r#"{"a":[0.5,"x\u00e9",null],"b":1,"c":null,"d":true}"#
        );
    }
}
