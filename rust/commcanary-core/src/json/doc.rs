//! The parsed-document tape.
//!
//! A [`Doc`] stores every value as a fixed-size [`Node`]. Container nodes point
//! at a contiguous run of child nodes (objects store key, value, key, value,
//! ...), strings point into one byte arena holding WTF-8 (UTF-8 that may also
//! encode lone surrogates). Keys keep their input order; canonical output sorts
//! them. A document can be cleared and reused, which is how trace events are
//! read one at a time without per-event allocation.

/// Index of a node inside its [`Doc`].
pub type NodeId = u32;

/// One JSON value on the tape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Node {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// An integer token that fits in `i64`.
    Int(i64),
    /// An integer token outside `i64`; its normalized digits are in the arena.
    BigInt {
        /// Arena offset of the digits.
        start: u32,
        /// Length of the digits.
        len: u32,
    },
    /// A token with a fraction or exponent (always finite). When the token
    /// was already spelled as CPython's `repr` of its value, `len > 0` and its
    /// text is kept in the arena at `text`, so canonical output copies it.
    Float {
        /// The value.
        value: f64,
        /// Arena offset of the canonical spelling.
        text: u32,
        /// Length of the canonical spelling (0 = not kept).
        len: u16,
    },
    /// A string; WTF-8 bytes in the arena.
    Str {
        /// Arena offset.
        start: u32,
        /// Byte length.
        len: u32,
    },
    /// An array of `len` nodes starting at `first`.
    Array {
        /// First child.
        first: u32,
        /// Element count.
        len: u32,
    },
    /// An object of `len` members: `2 * len` nodes (key, value) from `first`.
    Object {
        /// First key node.
        first: u32,
        /// Member count.
        len: u32,
    },
}

/// A parsed JSON document.
#[derive(Debug, Default, Clone)]
pub struct Doc {
    pub(crate) nodes: Vec<Node>,
    pub(crate) arena: Vec<u8>,
    pub(crate) root: Option<NodeId>,
}

impl Doc {
    /// An empty document.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty document with room for `nodes` values and `arena` bytes of
    /// text, so a small document of known size parses without regrowing.
    #[must_use]
    pub fn with_capacity(nodes: usize, arena: usize) -> Self {
        Self {
            nodes: Vec::with_capacity(nodes),
            arena: Vec::with_capacity(arena),
            root: None,
        }
    }

    /// Forgets all values but keeps the allocations.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.arena.clear();
        self.root = None;
    }

    /// The root value, if a value was parsed.
    #[must_use]
    pub fn root(&self) -> Option<Value<'_>> {
        self.root.map(|id| self.value(id))
    }

    /// The value of node `id`.
    #[must_use]
    pub fn value(&self, id: NodeId) -> Value<'_> {
        Value { doc: self, id }
    }

    pub(crate) fn push_str_bytes(&mut self, bytes: &[u8]) -> Node {
        let start = self.arena.len() as u32;
        self.arena.extend_from_slice(bytes);
        Node::Str {
            start,
            len: bytes.len() as u32,
        }
    }

    pub(crate) fn bytes(&self, start: u32, len: u32) -> &[u8] {
        &self.arena[start as usize..(start + len) as usize]
    }
}

/// A borrowed view of one value in a [`Doc`].
#[derive(Clone, Copy)]
pub struct Value<'a> {
    doc: &'a Doc,
    id: NodeId,
}

impl<'a> Value<'a> {
    /// The underlying node.
    #[must_use]
    pub fn node(&self) -> Node {
        self.doc.nodes[self.id as usize]
    }

    /// The node id.
    #[must_use]
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The owning document.
    #[must_use]
    pub fn doc(&self) -> &'a Doc {
        self.doc
    }

    /// A short name of the JSON type, for messages.
    #[must_use]
    pub fn type_name(&self) -> &'static str {
        match self.node() {
            Node::Null => "null",
            Node::Bool(_) => "boolean",
            Node::Int(_) | Node::BigInt { .. } => "integer",
            Node::Float { .. } => "float",
            Node::Str { .. } => "string",
            Node::Array { .. } => "array",
            Node::Object { .. } => "object",
        }
    }

    /// `true` for `null`.
    #[must_use]
    pub fn is_null(&self) -> bool {
        matches!(self.node(), Node::Null)
    }

    /// The boolean, if this is one.
    #[must_use]
    pub fn as_bool(&self) -> Option<bool> {
        match self.node() {
            Node::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The integer, if this is an integer token that fits `i64`.
    #[must_use]
    pub fn as_i64(&self) -> Option<i64> {
        match self.node() {
            Node::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The float, if this is a float token.
    #[must_use]
    pub fn as_float(&self) -> Option<f64> {
        match self.node() {
            Node::Float { value, .. } => Some(value),
            _ => None,
        }
    }

    /// A number as `f64` (integers converted as Python's `float(int)` does),
    /// `None` for non-numbers and booleans.
    #[must_use]
    pub fn as_number(&self) -> Option<f64> {
        match self.node() {
            Node::Int(i) => Some(i as f64),
            Node::Float { value, .. } => Some(value),
            Node::BigInt { start, len } => std::str::from_utf8(self.doc.bytes(start, len))
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|f| f.is_finite()),
            _ => None,
        }
    }

    /// The raw WTF-8 bytes of a string value.
    #[must_use]
    pub fn as_wtf8(&self) -> Option<&'a [u8]> {
        match self.node() {
            Node::Str { start, len } => Some(self.doc.bytes(start, len)),
            _ => None,
        }
    }

    /// The string, if this is a string of valid Unicode (no lone surrogates).
    #[must_use]
    pub fn as_str(&self) -> Option<&'a str> {
        self.as_wtf8().and_then(|b| std::str::from_utf8(b).ok())
    }

    /// Number of elements (array) or members (object); `None` otherwise.
    #[must_use]
    pub fn len(&self) -> Option<usize> {
        match self.node() {
            Node::Array { len, .. } | Node::Object { len, .. } => Some(len as usize),
            _ => None,
        }
    }

    /// `true` for an empty array or object.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// `true` for arrays.
    #[must_use]
    pub fn is_array(&self) -> bool {
        matches!(self.node(), Node::Array { .. })
    }

    /// `true` for objects.
    #[must_use]
    pub fn is_object(&self) -> bool {
        matches!(self.node(), Node::Object { .. })
    }

    /// Element `i` of an array, in constant time.
    #[must_use]
    pub fn element(&self, i: usize) -> Option<Value<'a>> {
        match self.node() {
            Node::Array { first, len } if (i as u32) < len => Some(Value {
                doc: self.doc,
                id: first + i as u32,
            }),
            _ => None,
        }
    }

    /// The elements of an array (empty iterator for other types).
    pub fn elements(&self) -> impl ExactSizeIterator<Item = Value<'a>> + 'a {
        let doc = self.doc;
        let (first, len) = match self.node() {
            Node::Array { first, len } => (first, len),
            _ => (0, 0),
        };
        (first..first + len).map(move |id| Value { doc, id })
    }

    /// The members of an object as (key bytes, value), in input order.
    pub fn members(&self) -> impl ExactSizeIterator<Item = (&'a [u8], Value<'a>)> + 'a {
        let doc = self.doc;
        let (first, len) = match self.node() {
            Node::Object { first, len } => (first, len),
            _ => (0, 0),
        };
        (0..len).map(move |i| {
            let key_id = first + 2 * i;
            let key = match doc.nodes[key_id as usize] {
                Node::Str { start, len } => doc.bytes(start, len),
                _ => &[][..],
            };
            (
                key,
                Value {
                    doc,
                    id: key_id + 1,
                },
            )
        })
    }

    /// The member named `key` of an object.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.members()
            .find(|(k, _)| *k == key.as_bytes())
            .map(|(_, v)| v)
    }
}
