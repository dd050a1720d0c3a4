//! Strict, bounded JSON reading and canonical JSON writing.
//!
//! Reading ([`parse`]) accepts exactly what CPython's `json.loads` accepts in
//! strict mode, minus the `NaN`/`Infinity` extensions and duplicate keys, and
//! enforces [`JsonLimits`] while it reads, before anything is allocated for a
//! value that would break them. Values land in a [`Doc`]: a flat tape of
//! [`Node`]s with strings kept in one WTF-8 arena, so lone UTF-16 surrogates
//! written as `\ud800` survive exactly as Python keeps them.
//!
//! Writing ([`canon`]) produces *canonical JSON v1*: byte-identical to
//! `json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
//! allow_nan=False)` in CPython. Integers stay integers and floats stay floats
//! (`8` and `8.0` hash differently, as in Python).

pub mod build;
pub mod canon;
mod doc;
mod parse;

pub use build::Json;
pub use doc::{Doc, Node, NodeId, Value};
pub use parse::{Parser, parse, parse_into, parse_tracking};

/// `{` as a named byte. Code that reads or writes JSON spells the object
/// delimiters with these constants, so that brace-matching tools (editors,
/// the function-length measure in `shape.py`) see only the braces of blocks.
pub(crate) const OPEN_BRACE: u8 = b'{';
/// `}` as a named byte (see [`OPEN_BRACE`]).
pub(crate) const CLOSE_BRACE: u8 = b'}';

/// Bounds enforced while reading one JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonLimits {
    /// Maximum nesting depth; the root value is depth 1.
    pub max_depth: u32,
    /// Maximum object members plus array elements in the whole document.
    pub max_items: u64,
    /// Maximum UTF-8 length of one string or key.
    pub max_string_bytes: usize,
    /// Maximum length of one numeric token.
    pub max_number_chars: usize,
}

impl Default for JsonLimits {
    /// The resource policy's JSON limits ([`crate::limits::current`]).
    fn default() -> Self {
        let l = crate::limits::current();
        Self {
            max_depth: l.max_json_depth,
            max_items: l.max_json_items,
            max_string_bytes: usize::try_from(l.max_json_string_bytes).unwrap_or(usize::MAX),
            max_number_chars: usize::try_from(l.max_json_number_chars).unwrap_or(usize::MAX),
        }
    }
}
