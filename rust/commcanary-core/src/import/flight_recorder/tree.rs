//! One read-only view over the two encodings of a Flight Recorder dump: the
//! JSON tape ([`crate::json::Value`]) and the restricted pickle arena
//! ([`crate::import::pickle::PickleValue`]), so one dump reader serves both.
//!
//! Invariants: the views never allocate per lookup, and a number spelled as a decimal string (`pg_status` in
//! the JSON encoding) reads as an integer through [`Tree::int_like`].

use crate::import::pickle::PickleValue;
use crate::json::{Node, Value};

/// The few operations the dump reader needs from a decoded value.
pub trait Tree<'a>: Copy + Sized {
    /// A short type name for messages.
    fn type_name(&self) -> &'static str;
    /// `None`/`null`.
    fn is_null(&self) -> bool;
    /// A boolean.
    fn as_bool(&self) -> Option<bool>;
    /// An integer.
    fn as_i64(&self) -> Option<i64>;
    /// An integer or a float.
    fn as_f64(&self) -> Option<f64>;
    /// A string.
    fn as_str(&self) -> Option<&'a str>;
    /// A string's UTF-8 bytes (valid: both decoders check them).
    fn str_bytes(&self) -> Option<&'a [u8]> {
        self.as_str().map(str::as_bytes)
    }
    /// The value's identity where the encoding shares values (a pickle's
    /// memo): equal identities are the same value. `None` for JSON.
    fn ident(&self) -> Option<u32> {
        None
    }
    /// Length of a list or tuple.
    fn seq_len(&self) -> Option<usize>;
    /// Element `i` of a list or tuple.
    fn element(&self, i: usize) -> Option<Self>;
    /// Calls `f` with each string-keyed member of a dict (the key's UTF-8
    /// bytes, the key's [`Tree::ident`], the value), in order; `false` when
    /// this is not a dict.
    fn members<F: FnMut(&'a [u8], Option<u32>, Self)>(&self, f: F) -> bool;
    /// The member named `key` of a dict.
    fn get(&self, key: &str) -> Option<Self> {
        let mut found = None;
        self.members(|k, _, v| {
            if found.is_none() && k == key.as_bytes() {
                found = Some(v);
            }
        });
        found
    }
    /// An integer, or a string holding one (`"100"`, `"-1"`).
    fn int_like(&self) -> Option<i64> {
        self.as_i64()
            .or_else(|| self.as_str().and_then(|s| s.trim().parse().ok()))
    }
}

impl<'a> Tree<'a> for Value<'a> {
    fn type_name(&self) -> &'static str {
        Value::type_name(self)
    }
    fn is_null(&self) -> bool {
        Value::is_null(self)
    }
    fn as_bool(&self) -> Option<bool> {
        Value::as_bool(self)
    }
    fn as_i64(&self) -> Option<i64> {
        Value::as_i64(self)
    }
    fn as_f64(&self) -> Option<f64> {
        Value::as_number(self)
    }
    fn as_str(&self) -> Option<&'a str> {
        Value::as_str(self)
    }
    fn seq_len(&self) -> Option<usize> {
        matches!(self.node(), Node::Array { .. }).then(|| self.len().unwrap_or(0))
    }
    fn element(&self, i: usize) -> Option<Self> {
        Value::element(self, i)
    }
    fn members<F: FnMut(&'a [u8], Option<u32>, Self)>(&self, mut f: F) -> bool {
        if !self.is_object() {
            return false;
        }
        for (k, v) in Value::members(self) {
            f(k, None, v);
        }
        true
    }
}

impl<'a> Tree<'a> for PickleValue<'a> {
    fn type_name(&self) -> &'static str {
        PickleValue::type_name(self)
    }
    fn is_null(&self) -> bool {
        self.is_none()
    }
    fn as_bool(&self) -> Option<bool> {
        PickleValue::as_bool(self)
    }
    fn as_i64(&self) -> Option<i64> {
        PickleValue::as_i64(self)
    }
    fn as_f64(&self) -> Option<f64> {
        PickleValue::as_f64(self)
    }
    fn as_str(&self) -> Option<&'a str> {
        PickleValue::as_str(self)
    }
    fn str_bytes(&self) -> Option<&'a [u8]> {
        PickleValue::str_bytes(self)
    }
    fn ident(&self) -> Option<u32> {
        Some(self.id())
    }
    fn seq_len(&self) -> Option<usize> {
        if self.is_sequence() { self.len() } else { None }
    }
    fn element(&self, i: usize) -> Option<Self> {
        PickleValue::element(self, i)
    }
    fn members<F: FnMut(&'a [u8], Option<u32>, Self)>(&self, mut f: F) -> bool {
        if !self.is_dict() {
            return false;
        }
        for (k, v) in PickleValue::members(self) {
            if let Some(bytes) = k.str_bytes() {
                f(bytes, Some(k.id()), v);
            }
        }
        true
    }
}
