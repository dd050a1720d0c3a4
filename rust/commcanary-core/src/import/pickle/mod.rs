//! A restricted, bounded reader for Python pickles of plain data.
//!
//! PyTorch Flight Recorder dumps are pickles of dicts, lists, tuples,
//! strings, ints, floats, booleans and `None`. [`load`] reads such a pickle
//! (protocols 0–5) from untrusted bytes into a [`PickleDoc`] without ever
//! executing or importing anything.
//!
//! Invariants:
//!
//! * **Nothing runs.** Only plain values are built: `None`, bool, int, float,
//!   str, bytes (also for bytearray), list, tuple, dict and set (also for
//!   frozenset). Every opcode that names or calls a global (GLOBAL,
//!   STACK_GLOBAL, INST, OBJ, NEWOBJ, NEWOBJ_EX, REDUCE, BUILD, EXT1/2/4,
//!   PERSID, BINPERSID, NEXT_BUFFER, READONLY_BUFFER) is refused with an
//!   error that names the global (`'module.name'`) where the pickle spells it
//!   and the opcode otherwise.
//! * **Bounded before allocating.** Every length prefix is checked against
//!   the bytes left before anything is copied; the value count is capped by
//!   [`PickleLimits::max_nodes`] and the nesting by
//!   [`PickleLimits::max_depth`]. Every other buffer (stack, memo, child
//!   lists, arena) grows by at most a few entries per input byte, and inputs
//!   are capped at 2 GiB so every offset fits `u32`.
//! * **Shared, not copied.** Like [`crate::json::Doc`], a document is a tape:
//!   values are fixed-size nodes in one `Vec`, string and bytes data sit in
//!   one byte arena, and containers list their children by node index. A memo
//!   reference (GET) copies an index, so a list referenced a million times,
//!   or appended to itself, costs O(1) per reference and may form a cycle
//!   (consumers that recurse must guard against cycles; [`PickleValue::id`]
//!   tells shared values apart).
//! * **Mutation works.** APPEND, SETITEM and ADDITEMS onto a memoized list,
//!   dict or set take effect wherever it is referenced: each container owns
//!   one run of child indices, grown in place or moved with room to spare.
//!   Dicts keep insertion order; a later item whose key equals an earlier
//!   one (str, bytes, int, bool, `None` keys; Python equality, so
//!   `True == 1`) replaces the value in place. Sets drop such duplicates
//!   too.
//! * **Errors, never panics.** Malformed input (truncation, stack underflow,
//!   unknown memo index, missing STOP, trailing bytes after STOP, unknown
//!   opcode, strings that are not UTF-8 where str is required) gives an
//!   [`Error::invalid`] one-line message; limits give [`Error::limit`]. Every
//!   message starts with `pickle:` and names the byte offset, never a path.
//!
//! Files: this one holds the document and its views; `parse` the
//! opcode machine; `text` the byte-level helpers (big integers, the
//! protocol-0 escapes, opcode names); `tests` the golden pickles and the
//! hostile inputs.

use crate::error::{Error, Result};

/// Resource limits for [`load`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PickleLimits {
    /// Most values (nodes) a document may hold; every scalar and container
    /// built counts one, memo references count none.
    pub max_nodes: u64,
    /// Most open MARKs at once, and deepest container nesting as built
    /// (a container holding only scalars has depth 1). Capped at 65534.
    pub max_depth: u32,
}

impl Default for PickleLimits {
    fn default() -> Self {
        Self {
            max_nodes: 50_000_000,
            max_depth: 512,
        }
    }
}

/// No link / no value (never a valid index: inputs are below 2 GiB).
const NIL: u32 = u32::MAX;
/// Largest input accepted, so arena offsets fit `u32` (text strings can
/// expand to twice their input size).
const MAX_INPUT: usize = (u32::MAX / 2) as usize;
/// Most decimal digits in a text integer (CPython's default int-string
/// conversion limit).
const MAX_TEXT_DIGITS: usize = 4300;
/// Highest pickle protocol understood.
const HIGHEST_PROTOCOL: u8 = 5;
/// Tail of every refusal message.
const ONLY_PLAIN: &str = "(only plain containers, strings and numbers are allowed)";

/// A container's children: `len` node indices in `children` from `first`
/// (dicts: `2 * len` indices, key then value).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Seq {
    first: u32,
    len: u32,
    /// Nesting depth as built (1 for a container of scalars).
    depth: u32,
}

/// One value on the tape.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Node {
    None,
    Bool(bool),
    Int(i64),
    /// An int outside `i64`: minimal two's-complement little-endian bytes in
    /// the arena (more than 8 of them).
    BigInt {
        start: u32,
        len: u32,
    },
    Float(f64),
    /// Valid UTF-8 in the arena.
    Str {
        start: u32,
        len: u32,
    },
    Bytes {
        start: u32,
        len: u32,
    },
    List(Seq),
    Tuple(Seq),
    Set(Seq),
    Dict(Seq),
}

/// A parsed pickle: nodes, child indices and one byte arena.
#[derive(Debug, Clone)]
pub struct PickleDoc {
    nodes: Vec<Node>,
    children: Vec<u32>,
    arena: Vec<u8>,
    root: u32,
}

impl PickleDoc {
    /// The unpickled value.
    #[must_use]
    pub fn root(&self) -> PickleValue<'_> {
        PickleValue {
            doc: self,
            id: self.root,
        }
    }

    /// Number of values (nodes) in the document.
    #[must_use]
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    fn node(&self, id: u32) -> Node {
        self.nodes.get(id as usize).copied().unwrap_or(Node::None)
    }

    fn blob(&self, start: u32, len: u32) -> &[u8] {
        let (start, len) = (start as usize, len as usize);
        self.arena.get(start..start + len).unwrap_or(&[])
    }

    fn kids(&self, first: u32, count: usize) -> &[u32] {
        let first = first as usize;
        self.children.get(first..first + count).unwrap_or(&[])
    }
}

/// A borrowed view of one value in a [`PickleDoc`].
#[derive(Clone, Copy)]
pub struct PickleValue<'a> {
    doc: &'a PickleDoc,
    id: u32,
}

impl std::fmt::Debug for PickleValue<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PickleValue({} #{})", self.type_name(), self.id)
    }
}

impl<'a> PickleValue<'a> {
    fn node(&self) -> Node {
        self.doc.node(self.id)
    }

    fn at(&self, id: u32) -> PickleValue<'a> {
        PickleValue { doc: self.doc, id }
    }

    /// The node index: two values with the same id are the same object
    /// (shared through the memo), which is how a consumer detects cycles.
    #[must_use]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The Python type's name: `"None"`, `"bool"`, `"int"`, `"float"`,
    /// `"str"`, `"bytes"`, `"list"`, `"tuple"`, `"dict"` or `"set"`.
    #[must_use]
    pub fn type_name(&self) -> &'static str {
        node_type(self.node())
    }

    /// `true` for `None`.
    #[must_use]
    pub fn is_none(&self) -> bool {
        matches!(self.node(), Node::None)
    }

    /// The boolean, if this is `True` or `False`.
    #[must_use]
    pub fn as_bool(&self) -> Option<bool> {
        match self.node() {
            Node::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The integer, if this is an int that fits `i64` (not for bools).
    #[must_use]
    pub fn as_i64(&self) -> Option<i64> {
        match self.node() {
            Node::Int(i) => Some(i),
            _ => None,
        }
    }

    /// An int outside `i64` as minimal two's-complement little-endian bytes
    /// (more than 8 of them); `None` for everything else.
    #[must_use]
    pub fn as_bigint_le(&self) -> Option<&'a [u8]> {
        match self.node() {
            Node::BigInt { start, len } => Some(self.doc.blob(start, len)),
            _ => None,
        }
    }

    /// A number as `f64`: a float, or an int rounded as Python's
    /// `float(int)` does (`None` when that overflows, and for bools).
    #[must_use]
    pub fn as_f64(&self) -> Option<f64> {
        match self.node() {
            Node::Int(i) => Some(i as f64),
            Node::Float(f) => Some(f),
            Node::BigInt { start, len } => bigint_to_f64(self.doc.blob(start, len)),
            _ => None,
        }
    }

    /// The string, if this is a str.
    #[must_use]
    pub fn as_str(&self) -> Option<&'a str> {
        match self.node() {
            Node::Str { start, len } => std::str::from_utf8(self.doc.blob(start, len)).ok(),
            _ => None,
        }
    }

    /// The UTF-8 bytes of a str, not checked again (the reader checked them).
    #[must_use]
    pub fn str_bytes(&self) -> Option<&'a [u8]> {
        match self.node() {
            Node::Str { start, len } => Some(self.doc.blob(start, len)),
            _ => None,
        }
    }

    /// The data, if this is bytes (or a bytearray, or a protocol-0/1 string
    /// that is not UTF-8).
    #[must_use]
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match self.node() {
            Node::Bytes { start, len } => Some(self.doc.blob(start, len)),
            _ => None,
        }
    }

    /// `true` for a list, tuple or set.
    #[must_use]
    pub fn is_sequence(&self) -> bool {
        matches!(self.node(), Node::List(_) | Node::Tuple(_) | Node::Set(_))
    }

    /// `true` for a dict.
    #[must_use]
    pub fn is_dict(&self) -> bool {
        matches!(self.node(), Node::Dict(_))
    }

    /// Element count of a sequence, item count of a dict; `None` otherwise.
    #[must_use]
    pub fn len(&self) -> Option<usize> {
        match self.node() {
            Node::List(s) | Node::Tuple(s) | Node::Set(s) | Node::Dict(s) => Some(s.len as usize),
            _ => None,
        }
    }

    /// `true` for an empty sequence or dict.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    fn sequence_kids(&self) -> &'a [u32] {
        match self.node() {
            Node::List(s) | Node::Tuple(s) | Node::Set(s) => self.doc.kids(s.first, s.len as usize),
            _ => &[],
        }
    }

    /// Element `i` of a sequence, in constant time.
    #[must_use]
    pub fn element(&self, i: usize) -> Option<PickleValue<'a>> {
        self.sequence_kids().get(i).map(|&id| self.at(id))
    }

    /// The elements of a sequence (empty for other types).
    pub fn elements(&self) -> impl ExactSizeIterator<Item = PickleValue<'a>> + 'a {
        let doc = self.doc;
        self.sequence_kids()
            .iter()
            .map(move |&id| PickleValue { doc, id })
    }

    /// The items of a dict as (key, value), in insertion order (empty for
    /// other types).
    pub fn members(
        &self,
    ) -> impl ExactSizeIterator<Item = (PickleValue<'a>, PickleValue<'a>)> + 'a {
        let doc = self.doc;
        let kids = match self.node() {
            Node::Dict(s) => doc.kids(s.first, 2 * s.len as usize),
            _ => &[],
        };
        kids.chunks_exact(2).map(move |pair| {
            (
                PickleValue { doc, id: pair[0] },
                PickleValue { doc, id: pair[1] },
            )
        })
    }

    /// The value of the dict item whose key is the str `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<PickleValue<'a>> {
        self.members()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }
}

fn node_type(node: Node) -> &'static str {
    match node {
        Node::None => "None",
        Node::Bool(_) => "bool",
        Node::Int(_) | Node::BigInt { .. } => "int",
        Node::Float(_) => "float",
        Node::Str { .. } => "str",
        Node::Bytes { .. } => "bytes",
        Node::List(_) => "list",
        Node::Tuple(_) => "tuple",
        Node::Set(_) => "set",
        Node::Dict(_) => "dict",
    }
}

/// Reads a pickle of plain data from untrusted `bytes`.
///
/// # Errors
///
/// [`Error::invalid`] for malformed input or a refused opcode,
/// [`Error::limit`] when `limits` (or the 2 GiB input cap) are exceeded.
pub fn load(bytes: &[u8], limits: PickleLimits) -> Result<PickleDoc> {
    if bytes.len() > MAX_INPUT {
        return Err(Error::limit(format!(
            "pickle: input of {} bytes exceeds the {MAX_INPUT}-byte cap",
            bytes.len()
        )));
    }
    Parser::new(bytes, limits).run()
}

mod parse;
#[cfg(test)]
mod tests;
mod text;

use self::parse::Parser;
use self::text::bigint_to_f64;
