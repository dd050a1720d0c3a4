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
//!   dict or set take effect wherever it is referenced: children are
//!   collected in per-container chains while parsing and laid out
//!   contiguously once STOP is read. Dicts keep insertion order; a later item
//!   whose key equals an earlier one (str, bytes, int, bool, `None` keys;
//!   Python equality, so `True == 1`) replaces the value in place. Sets drop
//!   such duplicates too.
//! * **Errors, never panics.** Malformed input (truncation, stack underflow,
//!   unknown memo index, missing STOP, trailing bytes after STOP, unknown
//!   opcode, strings that are not UTF-8 where str is required) gives an
//!   [`Error::invalid`] one-line message; limits give [`Error::limit`]. Every
//!   message starts with `pickle:` and names the byte offset, never a path.

use rustc_hash::FxHashMap;

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
/// (dicts: `2 * len` indices, key then value). While parsing, a list, dict
/// or set has `first` = its builder index and `len` unused.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Seq {
    first: u32,
    len: u32,
    /// Nesting depth as built (1 for a container of scalars).
    depth: u16,
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

/// The append chain of one list, dict or set under construction.
#[derive(Debug, Clone, Copy)]
struct Builder {
    node: u32,
    head: u32,
    tail: u32,
}

/// A run of `len` child indices in `Parser::items` from `start`.
#[derive(Debug, Clone, Copy)]
struct Seg {
    start: u32,
    len: u32,
    next: u32,
}

/// Which kind of mutable container an opcode builds or extends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Dict,
    Set,
}

struct Parser<'b> {
    input: &'b [u8],
    pos: usize,
    /// Offset and byte of the opcode being executed.
    op_at: usize,
    op: u8,
    max_nodes: u64,
    max_depth: u16,
    nodes: Vec<Node>,
    children: Vec<u32>,
    arena: Vec<u8>,
    stack: Vec<u32>,
    /// Stack lengths at each open MARK.
    marks: Vec<usize>,
    /// The memo: indices `0..memo.len()` densely, any others in `sparse`.
    memo: Vec<u32>,
    sparse: FxHashMap<u32, u32>,
    builders: Vec<Builder>,
    segs: Vec<Seg>,
    items: Vec<u32>,
}

impl<'b> Parser<'b> {
    fn new(input: &'b [u8], limits: PickleLimits) -> Self {
        let guess = (input.len() / 4).min(1 << 20);
        Self {
            input,
            pos: 0,
            op_at: 0,
            op: 0,
            max_nodes: limits.max_nodes.min(u64::from(NIL - 1)),
            max_depth: limits.max_depth.min(u32::from(u16::MAX - 1)) as u16,
            nodes: Vec::with_capacity(guess),
            children: Vec::new(),
            arena: Vec::with_capacity(input.len() / 2),
            stack: Vec::with_capacity(64),
            marks: Vec::new(),
            memo: Vec::with_capacity(guess / 2),
            sparse: FxHashMap::default(),
            builders: Vec::new(),
            segs: Vec::new(),
            items: Vec::with_capacity(guess),
        }
    }

    fn run(mut self) -> Result<PickleDoc> {
        loop {
            let Some(&op) = self.input.get(self.pos) else {
                return Err(Error::invalid(format!(
                    "pickle: truncated at byte {} (no STOP opcode)",
                    self.pos
                )));
            };
            self.op_at = self.pos;
            self.op = op;
            self.pos += 1;
            if self.step(op)? {
                break;
            }
        }
        let root = self.pop()?;
        if self.pos != self.input.len() {
            return Err(Error::invalid(format!(
                "pickle: {} bytes of trailing data at byte {} after STOP",
                self.input.len() - self.pos,
                self.pos
            )));
        }
        Ok(self.finish(root))
    }

    /// Executes one opcode; `true` at STOP.
    #[inline]
    fn step(&mut self, op: u8) -> Result<bool> {
        match op {
            b'.' => return Ok(true),
            0x80 => self.proto()?,
            0x95 => {
                let n = self.uint(8)?;
                self.check_len(n)?;
            }
            b'(' | b'0' | b'1' | b'2' => self.stack_op(op)?,
            b'p' | b'q' | b'r' | 0x94 | b'g' | b'h' | b'j' => self.memo_op(op)?,
            b'N' | 0x88 | 0x89 | b'I' | b'J' | b'K' | b'M' | b'L' | 0x8a | 0x8b | b'F' | b'G' => {
                self.number_op(op)?;
            }
            b'S' | b'T' | b'U' | b'V' | b'X' | 0x8c | 0x8d | b'B' | b'C' | 0x8e | 0x96 => {
                self.string_op(op)?;
            }
            b')' | b't' | 0x85 | 0x86 | 0x87 => self.tuple_op(op)?,
            b']' | b'a' | b'e' | b'l' | b'}' | b'd' | b's' | b'u' | 0x8f | 0x90 | 0x91 => {
                self.container_op(op)?;
            }
            _ => return Err(self.refuse(op)),
        }
        Ok(false)
    }

    // ---- errors -------------------------------------------------------

    fn name(&self) -> &'static str {
        op_name(self.op).unwrap_or("?")
    }

    /// `pickle: {what} at byte {opcode offset}`.
    #[cold]
    #[inline(never)]
    fn bad(&self, what: impl std::fmt::Display) -> Error {
        Error::invalid(format!("pickle: {what} at byte {}", self.op_at))
    }

    #[cold]
    #[inline(never)]
    fn truncated(&self, need: impl std::fmt::Display) -> Error {
        Error::invalid(format!(
            "pickle: truncated at byte {} ({} needs {need}, {} left)",
            self.pos,
            self.name(),
            self.input.len() - self.pos
        ))
    }

    #[cold]
    #[inline(never)]
    fn underflow(&self) -> Error {
        self.bad(format_args!("stack underflow in {}", self.name()))
    }

    #[cold]
    #[inline(never)]
    fn refuse(&self, op: u8) -> Error {
        let global = match op {
            b'c' | b'i' => self.line_global(),
            0x93 => self.stack_global(),
            _ => None,
        };
        let refused = match (global, op_name(op)) {
            (Some(g), _) => format!("global '{g}'"),
            (None, Some(name)) => format!("opcode {name}"),
            (None, None) => return self.bad(format_args!("unknown opcode 0x{op:02x}")),
        };
        Error::invalid(format!(
            "pickle: refuses {refused} at byte {} {ONLY_PLAIN}",
            self.op_at
        ))
    }

    /// `module.name` from the two text lines after GLOBAL or INST.
    fn line_global(&self) -> Option<String> {
        let rest = self.input.get(self.pos..)?;
        let mut lines = rest.splitn(3, |&b| b == b'\n');
        let module = lines.next()?;
        let name = lines.next()?;
        lines.next()?; // the name line must end in a newline
        printable_global(module, name)
    }

    /// `module.name` from the two str values STACK_GLOBAL would pop.
    fn stack_global(&self) -> Option<String> {
        let n = self.stack.len();
        let str_at = |i: usize| match self.nodes.get(*self.stack.get(i)? as usize)? {
            Node::Str { start, len } => {
                let (s, l) = (*start as usize, *len as usize);
                self.arena.get(s..s + l)
            }
            _ => None,
        };
        printable_global(str_at(n.checked_sub(2)?)?, str_at(n - 1)?)
    }

    // ---- reading arguments ---------------------------------------------

    /// The next `n` bytes, checked against what is left.
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'b [u8]> {
        let left = self.input.len() - self.pos;
        if n > left {
            return Err(self.truncated(format_args!("{n} bytes")));
        }
        let bytes = self.input.get(self.pos..self.pos + n).unwrap_or(&[]);
        self.pos += n;
        Ok(bytes)
    }

    /// A length prefix checked against the bytes left, as `usize`.
    #[inline]
    fn check_len(&self, n: u64) -> Result<usize> {
        let left = self.input.len() - self.pos;
        match usize::try_from(n) {
            Ok(n) if n <= left => Ok(n),
            _ => Err(self.truncated(format_args!("{n} bytes"))),
        }
    }

    /// A little-endian unsigned integer of `width` bytes (1, 2, 4 or 8).
    #[inline]
    fn uint(&mut self, width: usize) -> Result<u64> {
        let bytes = self.take(width)?;
        Ok(bytes
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// A 4-byte signed length (BINSTRING, LONG4), refused when negative.
    fn signed_len(&mut self) -> Result<u64> {
        let n = self.uint(4)? as u32 as i32;
        u64::try_from(n)
            .map_err(|_| self.bad(format_args!("{} with negative length {n}", self.name())))
    }

    /// The newline-terminated argument of a text opcode, without the newline.
    fn line(&mut self) -> Result<&'b [u8]> {
        let rest = self.input.get(self.pos..).unwrap_or(&[]);
        match rest.iter().position(|&b| b == b'\n') {
            Some(n) => {
                self.pos += n + 1;
                Ok(&rest[..n])
            }
            None => Err(self.truncated("a newline-terminated argument")),
        }
    }

    // ---- the stack ------------------------------------------------------

    /// Stack length at the innermost open MARK (items below are hidden).
    #[inline]
    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    #[inline]
    fn pop(&mut self) -> Result<u32> {
        if self.stack.len() > self.floor() {
            self.stack.pop().ok_or_else(|| self.underflow())
        } else {
            Err(self.underflow())
        }
    }

    #[inline]
    fn top(&self) -> Result<u32> {
        match self.stack.last() {
            Some(&id) if self.stack.len() > self.floor() => Ok(id),
            _ => Err(self.underflow()),
        }
    }

    /// Closes the innermost MARK and returns its stack position.
    fn pop_mark(&mut self) -> Result<usize> {
        self.marks
            .pop()
            .ok_or_else(|| self.bad(format_args!("{} without a MARK", self.name())))
    }

    /// Adds a value (not pushed).
    #[inline]
    fn add(&mut self, node: Node) -> Result<u32> {
        if self.nodes.len() as u64 >= self.max_nodes {
            return Err(Error::limit(format!(
                "pickle: more than max_nodes={} values at byte {}",
                self.max_nodes, self.op_at
            )));
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(node);
        Ok(id)
    }

    /// Adds a value and pushes it.
    #[inline]
    fn push(&mut self, node: Node) -> Result<()> {
        let id = self.add(node)?;
        self.stack.push(id);
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn depth_error(&self) -> Error {
        Error::limit(format!(
            "pickle: nesting deeper than max_depth={} at byte {}",
            self.max_depth, self.op_at
        ))
    }

    fn proto(&mut self) -> Result<()> {
        let v = self.uint(1)? as u8;
        if v > HIGHEST_PROTOCOL {
            return Err(self.bad(format_args!("unsupported protocol {v}")));
        }
        Ok(())
    }

    #[inline]
    fn stack_op(&mut self, op: u8) -> Result<()> {
        match op {
            b'(' => {
                if self.marks.len() >= usize::from(self.max_depth) {
                    return Err(self.depth_error());
                }
                self.marks.push(self.stack.len());
            }
            // POP with nothing above the MARK pops the MARK (protocol 0
            // pickles of recursive tuples rely on it).
            b'0' if self.stack.len() <= self.floor() && !self.marks.is_empty() => {
                self.marks.pop();
            }
            b'0' => {
                self.pop()?;
            }
            b'1' => {
                let at = self.pop_mark()?;
                self.stack.truncate(at);
            }
            _ => {
                let id = self.top()?;
                self.stack.push(id);
            }
        }
        Ok(())
    }

    #[inline]
    fn memo_op(&mut self, op: u8) -> Result<()> {
        match op {
            b'p' => {
                let i = self.text_index()?;
                self.memo_put(i)
            }
            b'q' => {
                let i = self.uint(1)? as u32;
                self.memo_put(i)
            }
            b'r' => {
                let i = self.uint(4)? as u32;
                self.memo_put(i)
            }
            0x94 => match u32::try_from(self.memo_len()) {
                Ok(i) => self.memo_put(i),
                Err(_) => Err(self.bad("memo full")),
            },
            b'g' => {
                let i = self.text_index()?;
                self.memo_get(i)
            }
            b'h' => {
                let i = self.uint(1)? as u32;
                self.memo_get(i)
            }
            _ => {
                let i = self.uint(4)? as u32;
                self.memo_get(i)
            }
        }
    }

    fn text_index(&mut self) -> Result<u32> {
        let line = self.line()?;
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .ok_or_else(|| self.bad(format_args!("bad {} argument", self.name())))
    }

    /// Python's `len(memo)`: MEMOIZE's index. `memo` and `sparse` never
    /// hold the same index.
    fn memo_len(&self) -> usize {
        self.memo.len() + self.sparse.len()
    }

    #[inline]
    fn memo_put(&mut self, i: u32) -> Result<()> {
        let id = self.top()?;
        let at = i as usize;
        if let Some(slot) = self.memo.get_mut(at) {
            *slot = id;
        } else if at == self.memo.len() {
            if !self.sparse.is_empty() {
                self.sparse.remove(&i);
            }
            self.memo.push(id);
        } else {
            self.sparse.insert(i, id);
        }
        Ok(())
    }

    #[inline]
    fn memo_get(&mut self, i: u32) -> Result<()> {
        let id = match self.memo.get(i as usize) {
            Some(&id) => Some(id),
            None => self.sparse.get(&i).copied(),
        };
        let id =
            id.ok_or_else(|| self.bad(format_args!("{} of unknown memo index {i}", self.name())))?;
        self.stack.push(id);
        Ok(())
    }

    // ---- numbers --------------------------------------------------------

    #[inline]
    fn number_op(&mut self, op: u8) -> Result<()> {
        let node = match op {
            b'N' => Node::None,
            0x88 => Node::Bool(true),
            0x89 => Node::Bool(false),
            b'J' => Node::Int(i64::from(self.uint(4)? as u32 as i32)),
            b'K' => Node::Int(self.uint(1)? as i64),
            b'M' => Node::Int(self.uint(2)? as i64),
            b'I' | b'L' => {
                let line = self.line()?;
                return self.text_int(line);
            }
            0x8a | 0x8b => {
                let n = if op == 0x8a {
                    self.uint(1)?
                } else {
                    self.signed_len()?
                };
                let n = self.check_len(n)?;
                let bytes = self.take(n)?;
                return self.binary_int(bytes);
            }
            b'F' => {
                let line = self.line()?;
                Node::Float(
                    std::str::from_utf8(line)
                        .ok()
                        .and_then(|s| s.trim().parse::<f64>().ok())
                        .ok_or_else(|| self.bad("bad FLOAT argument"))?,
                )
            }
            _ => Node::Float(f64::from_bits(self.uint(8)?.swap_bytes())),
        };
        self.push(node)
    }

    /// INT (`I01`/`I00` are booleans) or LONG (a trailing `L` allowed).
    fn text_int(&mut self, line: &[u8]) -> Result<()> {
        let mut text = line.trim_ascii();
        if self.op == b'I' && (text == b"00" || text == b"01") {
            return self.push(Node::Bool(text == b"01"));
        }
        if self.op == b'L' {
            text = text.strip_suffix(b"L").unwrap_or(text);
        }
        if let Some(i) = std::str::from_utf8(text)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
        {
            return self.push(Node::Int(i));
        }
        let (neg, digits) = match text.split_first() {
            Some((b'-', rest)) => (true, rest),
            Some((b'+', rest)) => (false, rest),
            _ => (false, text),
        };
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return Err(self.bad(format_args!("bad {} argument", self.name())));
        }
        if digits.len() > MAX_TEXT_DIGITS {
            return Err(self.bad(format_args!(
                "integer too large ({} digits, at most {MAX_TEXT_DIGITS})",
                digits.len()
            )));
        }
        let bytes = decimal_to_le(neg, digits);
        self.binary_int(&bytes)
    }

    /// A two's-complement little-endian int (LONG1, LONG4).
    fn binary_int(&mut self, bytes: &[u8]) -> Result<()> {
        let bytes = trim_le(bytes);
        if bytes.len() <= 8 {
            return self.push(Node::Int(le_to_i64(bytes)));
        }
        let start = self.arena.len() as u32;
        self.arena.extend_from_slice(bytes);
        let len = bytes.len() as u32;
        self.push(Node::BigInt { start, len })
    }

    // ---- strings and bytes ---------------------------------------------

    #[inline]
    fn string_op(&mut self, op: u8) -> Result<()> {
        let start = self.arena.len();
        let as_str = match op {
            b'S' => {
                let line = self.line()?;
                let quoted = match line {
                    [q, inner @ .., last] if (*q == b'\'' || *q == b'"') && last == q => inner,
                    _ => return Err(self.bad("STRING argument is not quoted")),
                };
                escape_decode(quoted, &mut self.arena).map_err(|e| self.bad(e))?;
                None
            }
            b'V' => {
                let line = self.line()?;
                raw_unicode_escape(line, &mut self.arena).map_err(|e| self.bad(e))?;
                Some(true)
            }
            _ => {
                let n = match op {
                    b'T' => self.signed_len()?,
                    b'U' | 0x8c | b'C' => self.uint(1)?,
                    b'X' | b'B' => self.uint(4)?,
                    _ => self.uint(8)?,
                };
                let n = self.check_len(n)?;
                let data = self.take(n)?;
                self.arena.extend_from_slice(data);
                match op {
                    b'T' | b'U' => None,
                    b'X' | 0x8c | 0x8d => Some(true),
                    _ => Some(false),
                }
            }
        };
        let data = self.arena.get(start..).unwrap_or(&[]);
        let utf8 = std::str::from_utf8(data).is_ok();
        let is_str = match as_str {
            Some(true) if !utf8 => {
                return Err(self.bad(format_args!("{} is not valid UTF-8", self.name())));
            }
            Some(s) => s,
            None => utf8,
        };
        let (start, len) = (start as u32, data.len() as u32);
        let node = if is_str {
            Node::Str { start, len }
        } else {
            Node::Bytes { start, len }
        };
        self.push(node)
    }

    // ---- containers -----------------------------------------------------

    fn depth_of(&self, id: u32) -> u16 {
        match self.nodes.get(id as usize) {
            Some(Node::List(s) | Node::Tuple(s) | Node::Set(s) | Node::Dict(s)) => s.depth,
            _ => 0,
        }
    }

    /// Depth of a tuple holding `kids`.
    fn tuple_depth(&self, kids: &[u32]) -> Result<u16> {
        let deepest = kids.iter().map(|&k| self.depth_of(k)).max().unwrap_or(0);
        if deepest >= self.max_depth {
            return Err(self.depth_error());
        }
        Ok(deepest + 1)
    }

    fn tuple_op(&mut self, op: u8) -> Result<()> {
        let from = match op {
            b')' => self.stack.len(),
            b't' => self.pop_mark()?,
            _ => {
                let n = usize::from(op - 0x84);
                match self.stack.len().checked_sub(n) {
                    Some(from) if from >= self.floor() => from,
                    _ => return Err(self.underflow()),
                }
            }
        };
        let kids = self.stack.get(from..).unwrap_or(&[]);
        let depth = self.tuple_depth(kids)?;
        let seq = Seq {
            first: self.children.len() as u32,
            len: kids.len() as u32,
            depth,
        };
        self.children.extend_from_slice(kids);
        self.stack.truncate(from);
        self.push(Node::Tuple(seq))
    }

    #[inline]
    fn container_op(&mut self, op: u8) -> Result<()> {
        let kind = match op {
            b']' | b'a' | b'e' | b'l' => Kind::List,
            b'}' | b'd' | b's' | b'u' => Kind::Dict,
            _ => Kind::Set,
        };
        match op {
            // EMPTY_LIST, EMPTY_DICT, EMPTY_SET
            b']' | b'}' | 0x8f => {
                let from = self.stack.len();
                self.build(kind, from)
            }
            // LIST, DICT, FROZENSET
            b'l' | b'd' | 0x91 => {
                let from = self.pop_mark()?;
                self.build(kind, from)
            }
            // APPEND, SETITEM: one value or one key/value pair
            b'a' | b's' => {
                let n = if kind == Kind::Dict { 2 } else { 1 };
                match self.stack.len().checked_sub(n + 1) {
                    Some(at) if at >= self.floor() => self.extend(kind, at),
                    _ => Err(self.underflow()),
                }
            }
            // APPENDS, SETITEMS, ADDITEMS: the items above the MARK
            _ => {
                let from = self.pop_mark()?;
                match from.checked_sub(1) {
                    Some(at) if at >= self.floor() => self.extend(kind, at),
                    _ => Err(self.underflow()),
                }
            }
        }
    }

    /// A new list, dict or set holding `stack[from..]`, pushed in their place.
    fn build(&mut self, kind: Kind, from: usize) -> Result<()> {
        let seq = Seq {
            first: self.builders.len() as u32,
            len: 0,
            depth: 1,
        };
        let node = match kind {
            Kind::List => Node::List(seq),
            Kind::Dict => Node::Dict(seq),
            Kind::Set => Node::Set(seq),
        };
        let id = self.add(node)?;
        self.builders.push(Builder {
            node: id,
            head: NIL,
            tail: NIL,
        });
        self.add_items(kind, id, seq, from)?;
        self.stack.push(id);
        Ok(())
    }

    /// Moves `stack[at + 1..]` into the container at `stack[at]`, which must
    /// be a `kind`.
    fn extend(&mut self, kind: Kind, at: usize) -> Result<()> {
        let target = self
            .stack
            .get(at)
            .copied()
            .ok_or_else(|| self.underflow())?;
        match (kind, self.nodes.get(target as usize).copied()) {
            (Kind::List, Some(Node::List(seq)))
            | (Kind::Dict, Some(Node::Dict(seq)))
            | (Kind::Set, Some(Node::Set(seq))) => self.add_items(kind, target, seq, at + 1),
            (_, node) => {
                let found = node.map_or("?", node_type);
                Err(self.bad(format_args!("{} onto a {found}", self.name())))
            }
        }
    }

    /// Adds `stack[from..]` to container `target` (a `kind` described by
    /// `seq`) and pops them.
    fn add_items(&mut self, kind: Kind, target: u32, seq: Seq, from: usize) -> Result<()> {
        let kids = self.stack.get(from..).unwrap_or(&[]);
        if kind == Kind::Dict && kids.len() % 2 != 0 {
            return Err(self.bad(format_args!("{} with an odd number of items", self.name())));
        }
        let depth = self.scan_items(kind, kids, target)?.max(seq.depth);
        self.chain(seq.first as usize, from);
        if let Some(Node::List(s) | Node::Dict(s) | Node::Set(s)) =
            self.nodes.get_mut(target as usize)
        {
            s.depth = depth;
        }
        Ok(())
    }

    /// The depth of container `target` holding `kids` (ignoring `target`
    /// itself); refuses lists, dicts and sets as dict keys or set elements
    /// (Python raises `TypeError: unhashable type`).
    fn scan_items(&self, kind: Kind, kids: &[u32], target: u32) -> Result<u16> {
        let mut deepest = 0;
        for (i, &k) in kids.iter().enumerate() {
            let seq = match self.nodes.get(k as usize) {
                Some(Node::Tuple(s)) => s,
                Some(node @ (Node::List(s) | Node::Dict(s) | Node::Set(s))) => {
                    let is_key = kind == Kind::Set || (kind == Kind::Dict && i % 2 == 0);
                    if is_key {
                        let found = node_type(*node);
                        return Err(self.bad(format_args!("unhashable {found} in {}", self.name())));
                    }
                    s
                }
                _ => continue,
            };
            if k != target {
                deepest = deepest.max(seq.depth);
            }
        }
        if deepest >= self.max_depth {
            return Err(self.depth_error());
        }
        Ok(deepest + 1)
    }

    /// Appends `stack[from..]` to builder `b`'s chain and pops them.
    fn chain(&mut self, b: usize, from: usize) {
        let Some(kids) = self.stack.get(from..) else {
            return;
        };
        let Some(builder) = self.builders.get_mut(b) else {
            return;
        };
        if kids.is_empty() {
            return;
        }
        let start = self.items.len() as u32;
        let n = kids.len() as u32;
        let idx = self.segs.len() as u32;
        match self.segs.get_mut(builder.tail as usize) {
            Some(tail) if tail.start as usize + tail.len as usize == self.items.len() => {
                tail.len += n;
            }
            tail => {
                match tail {
                    Some(tail) => tail.next = idx,
                    None => builder.head = idx,
                }
                builder.tail = idx;
                self.segs.push(Seg {
                    start,
                    len: n,
                    next: NIL,
                });
            }
        }
        self.items.extend_from_slice(kids);
        self.stack.truncate(from);
    }

    // ---- layout ---------------------------------------------------------

    /// Lays every list, dict and set out contiguously in `children`.
    fn finish(self, root: u32) -> PickleDoc {
        let Parser {
            mut nodes,
            mut children,
            arena,
            builders,
            segs,
            items,
            ..
        } = self;
        children.reserve(items.len());
        let mut gathered = Vec::new();
        let mut index = FxHashMap::default();
        for b in &builders {
            let kids = gather(&segs, &items, b.head, &mut gathered);
            let Some(node) = nodes.get(b.node as usize).copied() else {
                continue;
            };
            let first = children.len();
            let width = match node {
                Node::List(_) => 0,
                Node::Dict(_) => 2,
                _ => 1,
            };
            if width == 0 {
                children.extend_from_slice(kids);
            } else {
                dedup(&nodes, &arena, kids, width, &mut children, &mut index);
            }
            let len = ((children.len() - first) / width.max(1)) as u32;
            if let Some(Node::List(s) | Node::Dict(s) | Node::Set(s)) =
                nodes.get_mut(b.node as usize)
            {
                (s.first, s.len) = (first as u32, len);
            }
        }
        PickleDoc {
            nodes,
            children,
            arena,
            root,
        }
    }
}

/// A dict key or set element compared by value (Python equality for the
/// hashable scalars; other keys never compare equal here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key<'a> {
    None,
    Int(i64),
    Big(&'a [u8]),
    Float(u64),
    Str(&'a [u8]),
    Bytes(&'a [u8]),
}

fn key_of<'a>(nodes: &[Node], arena: &'a [u8], id: u32) -> Option<Key<'a>> {
    let blob = |start: u32, len: u32| arena.get(start as usize..start as usize + len as usize);
    Some(match *nodes.get(id as usize)? {
        Node::None => Key::None,
        Node::Bool(b) => Key::Int(i64::from(b)),
        Node::Int(i) => Key::Int(i),
        Node::BigInt { start, len } => Key::Big(blob(start, len)?),
        Node::Float(f) if f.is_nan() => return None,
        Node::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Key::Int(f as i64),
        Node::Float(f) => Key::Float(f.to_bits()),
        Node::Str { start, len } => Key::Str(blob(start, len)?),
        Node::Bytes { start, len } => Key::Bytes(blob(start, len)?),
        _ => return None,
    })
}

/// The children a builder's chain from `head` lists: a slice of `items`
/// when the chain is one segment (the common case), else gathered.
fn gather<'s>(segs: &[Seg], items: &'s [u32], head: u32, gathered: &'s mut Vec<u32>) -> &'s [u32] {
    let slice = |s: &Seg| items.get(s.start as usize..s.start as usize + s.len as usize);
    match segs.get(head as usize) {
        None => &[],
        Some(s) if s.next == NIL => slice(s).unwrap_or(&[]),
        Some(_) => {
            gathered.clear();
            let mut seg = head;
            while let Some(s) = segs.get(seg as usize) {
                gathered.extend_from_slice(slice(s).unwrap_or(&[]));
                seg = s.next;
            }
            gathered
        }
    }
}

/// Appends `items` (groups of `width`: 2 for dict pairs) to `out`, a later
/// group whose first item equals an earlier one's replacing it in place.
fn dedup<'a>(
    nodes: &[Node],
    arena: &'a [u8],
    items: &[u32],
    width: usize,
    out: &mut Vec<u32>,
    index: &mut FxHashMap<Key<'a>, usize>,
) {
    if items.len() <= 64 * width {
        return dedup_small(nodes, arena, items, width, out);
    }
    index.clear();
    for group in items.chunks_exact(width) {
        let key = key_of(nodes, arena, group[0]);
        let seen = key.and_then(|k| index.get(&k).copied());
        match (seen, key) {
            (Some(at), _) => replace(out, at, group),
            (None, Some(k)) => {
                index.insert(k, out.len());
                out.extend_from_slice(group);
            }
            (None, None) => out.extend_from_slice(group),
        }
    }
}

/// [`dedup`] for at most 64 groups: a 256-bit filter of seen keys, and a
/// scan of `out` only when the filter says the key may be there.
fn dedup_small(nodes: &[Node], arena: &[u8], items: &[u32], width: usize, out: &mut Vec<u32>) {
    let base = out.len();
    let mut seen = [0u64; 4];
    for group in items.chunks_exact(width) {
        let Some(key) = key_of(nodes, arena, group[0]) else {
            out.extend_from_slice(group);
            continue;
        };
        let h = key.quick_hash() >> 56;
        let (word, bit) = ((h >> 6) as usize & 3, 1u64 << (h & 63));
        if seen[word] & bit != 0 {
            let mut at = (base..out.len()).step_by(width);
            if let Some(at) = at.find(|&at| key_of(nodes, arena, out[at]) == Some(key)) {
                replace(out, at, group);
                continue;
            }
        }
        seen[word] |= bit;
        out.extend_from_slice(group);
    }
}

/// Overwrites the value(s) of the group at `out[at..]` with `group`'s.
fn replace(out: &mut [u32], at: usize, group: &[u32]) {
    if let (Some(dst), Some(src)) = (out.get_mut(at + 1..at + group.len()), group.get(1..)) {
        dst.copy_from_slice(src);
    }
}

impl Key<'_> {
    /// A cheap 64-bit hash (length and a few bytes of strings).
    fn quick_hash(&self) -> u64 {
        let bytes_hash = |b: &[u8]| {
            let at = |i: usize| u64::from(b.get(i).copied().unwrap_or(0));
            let n = b.len();
            (n as u64) ^ at(0) << 8 ^ at(n / 2) << 16 ^ at(n.wrapping_sub(1)) << 24
        };
        let raw = match *self {
            Key::None => 0,
            Key::Int(i) => i as u64,
            Key::Float(bits) => bits,
            Key::Big(b) | Key::Str(b) => bytes_hash(b),
            Key::Bytes(b) => bytes_hash(b) ^ 1 << 40,
        };
        raw.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
}

/// `module.name` when both are short printable ASCII (for messages).
fn printable_global(module: &[u8], name: &[u8]) -> Option<String> {
    let ok = |s: &[u8]| s.len() <= 200 && s.iter().all(|b| (0x21..0x7f).contains(b) && *b != b'\'');
    if !ok(module) || !ok(name) {
        return None;
    }
    Some(format!(
        "{}.{}",
        String::from_utf8_lossy(module),
        String::from_utf8_lossy(name)
    ))
}

/// Drops redundant sign bytes of a two's-complement little-endian int.
fn trim_le(mut b: &[u8]) -> &[u8] {
    while let [rest @ .., prev, last] = b {
        let redundant = (*last == 0 && *prev & 0x80 == 0) || (*last == 0xff && *prev & 0x80 != 0);
        if !redundant {
            break;
        }
        b = &b[..rest.len() + 1];
    }
    if b == [0] { &[] } else { b }
}

/// Sign-extends at most 8 two's-complement little-endian bytes.
fn le_to_i64(b: &[u8]) -> i64 {
    let negative = b.last().is_some_and(|&x| x & 0x80 != 0);
    let mut buf = if negative { [0xff; 8] } else { [0; 8] };
    for (dst, src) in buf.iter_mut().zip(b) {
        *dst = *src;
    }
    i64::from_le_bytes(buf)
}

/// Decimal digits to two's-complement little-endian bytes (9 digits per
/// step, so 4300 digits cost about 200k limb operations).
fn decimal_to_le(negative: bool, digits: &[u8]) -> Vec<u8> {
    let mut limbs: Vec<u32> = Vec::with_capacity(digits.len() / 9 + 1);
    let head = match digits.len() % 9 {
        0 => 9,
        n => n,
    };
    let (first, rest) = digits.split_at(head.min(digits.len()));
    for chunk in std::iter::once(first).chain(rest.chunks(9)) {
        let mul = 10u64.pow(chunk.len() as u32);
        let mut carry = chunk
            .iter()
            .fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0'));
        for limb in &mut limbs {
            let t = u64::from(*limb) * mul + carry;
            *limb = t as u32;
            carry = t >> 32;
        }
        if carry != 0 {
            limbs.push(carry as u32);
        }
    }
    let mut bytes: Vec<u8> = limbs.iter().flat_map(|l| l.to_le_bytes()).collect();
    bytes.push(0);
    if negative {
        negate_le(&mut bytes);
    }
    let len = trim_le(&bytes).len();
    bytes.truncate(len);
    bytes
}

/// Two's-complement negation in place.
fn negate_le(bytes: &mut [u8]) {
    let mut carry = true;
    for b in bytes {
        let (v, c) = (!*b).overflowing_add(u8::from(carry));
        *b = v;
        carry = c;
    }
}

/// A big int as the nearest `f64` (`None` when it overflows).
fn bigint_to_f64(le: &[u8]) -> Option<f64> {
    let negative = le.last().is_some_and(|&x| x & 0x80 != 0);
    let mut mag = le.to_vec();
    if negative {
        negate_le(&mut mag);
    }
    while mag.last() == Some(&0) {
        mag.pop();
    }
    if mag.len() > 200 {
        return None;
    }
    let n = mag.len();
    let low = n.saturating_sub(16);
    let mut top = [0u8; 16];
    for (dst, src) in top.iter_mut().zip(&mag[low..]) {
        *dst = *src;
    }
    let mut m = u128::from_le_bytes(top);
    if mag[..low].iter().any(|&b| b != 0) {
        m |= 1; // sticky bit: rounds like the exact value
    }
    let f = m as f64 * 2f64.powi(8 * low as i32);
    let f = if negative { -f } else { f };
    f.is_finite().then_some(f)
}

/// Python's bytes-literal escapes (protocol 0/1 STRING), appended to `out`.
fn escape_decode(src: &[u8], out: &mut Vec<u8>) -> std::result::Result<(), &'static str> {
    let mut i = 0;
    while i < src.len() {
        let rest = &src[i..];
        let Some(bs) = rest.iter().position(|&b| b == b'\\') else {
            out.extend_from_slice(rest);
            break;
        };
        out.extend_from_slice(&rest[..bs]);
        i += bs + 1;
        let Some(&e) = src.get(i) else {
            return Err("STRING argument ends in a lone backslash");
        };
        i += 1;
        match e {
            b'\n' => {}
            b'\\' | b'\'' | b'"' => out.push(e),
            b'a' => out.push(7),
            b'b' => out.push(8),
            b't' => out.push(9),
            b'n' => out.push(10),
            b'v' => out.push(11),
            b'f' => out.push(12),
            b'r' => out.push(13),
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                for _ in 0..2 {
                    match src.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push(v as u8);
            }
            b'x' => {
                let v = src.get(i..i + 2).and_then(hex_value);
                out.push(v.ok_or("STRING argument has a bad \\x escape")? as u8);
                i += 2;
            }
            _ => out.extend_from_slice(&[b'\\', e]),
        }
    }
    Ok(())
}

/// Python's `raw_unicode_escape` (protocol 0 UNICODE) as UTF-8, appended to
/// `out`: bytes are Latin-1 except `\uXXXX` and `\UXXXXXXXX` after an odd
/// run of backslashes. Surrogate code points are refused.
fn raw_unicode_escape(src: &[u8], out: &mut Vec<u8>) -> std::result::Result<(), &'static str> {
    let mut i = 0;
    while let Some(&b) = src.get(i) {
        if b >= 0x80 {
            out.extend_from_slice(&[0xc0 | (b >> 6), 0x80 | (b & 0x3f)]);
            i += 1;
            continue;
        }
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let run = src[i..].iter().take_while(|&&c| c == b'\\').count();
        let after = i + run;
        let width = match src.get(after) {
            Some(b'u') if run % 2 == 1 => 4,
            Some(b'U') if run % 2 == 1 => 8,
            _ => {
                out.extend_from_slice(&src[i..after]);
                i = after;
                continue;
            }
        };
        out.extend_from_slice(&src[i..after - 1]);
        let digits = src.get(after + 1..after + 1 + width);
        let cp = digits
            .and_then(hex_value)
            .ok_or("UNICODE argument has a truncated \\u escape")?;
        let ch = char::from_u32(cp)
            .ok_or("UNICODE argument has a surrogate or out-of-range code point")?;
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        i = after + 1 + width;
    }
    Ok(())
}

/// The value of ASCII hex digits (at most 8).
fn hex_value(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |acc, &d| {
        let v = (d as char).to_digit(16)?;
        Some(acc.checked_mul(16)? + v)
    })
}

/// Every opcode of protocols 0–5, for messages.
const OPCODES: &[(u8, &str)] = &[
    (b'(', "MARK"),
    (b'.', "STOP"),
    (b'0', "POP"),
    (b'1', "POP_MARK"),
    (b'2', "DUP"),
    (b'F', "FLOAT"),
    (b'I', "INT"),
    (b'J', "BININT"),
    (b'K', "BININT1"),
    (b'L', "LONG"),
    (b'M', "BININT2"),
    (b'N', "NONE"),
    (b'P', "PERSID"),
    (b'Q', "BINPERSID"),
    (b'R', "REDUCE"),
    (b'S', "STRING"),
    (b'T', "BINSTRING"),
    (b'U', "SHORT_BINSTRING"),
    (b'V', "UNICODE"),
    (b'X', "BINUNICODE"),
    (b'a', "APPEND"),
    (b'b', "BUILD"),
    (b'c', "GLOBAL"),
    (b'd', "DICT"),
    (b'}', "EMPTY_DICT"),
    (b'e', "APPENDS"),
    (b'g', "GET"),
    (b'h', "BINGET"),
    (b'i', "INST"),
    (b'j', "LONG_BINGET"),
    (b'l', "LIST"),
    (b']', "EMPTY_LIST"),
    (b'o', "OBJ"),
    (b'p', "PUT"),
    (b'q', "BINPUT"),
    (b'r', "LONG_BINPUT"),
    (b's', "SETITEM"),
    (b't', "TUPLE"),
    (b')', "EMPTY_TUPLE"),
    (b'u', "SETITEMS"),
    (b'G', "BINFLOAT"),
    (0x80, "PROTO"),
    (0x81, "NEWOBJ"),
    (0x82, "EXT1"),
    (0x83, "EXT2"),
    (0x84, "EXT4"),
    (0x85, "TUPLE1"),
    (0x86, "TUPLE2"),
    (0x87, "TUPLE3"),
    (0x88, "NEWTRUE"),
    (0x89, "NEWFALSE"),
    (0x8a, "LONG1"),
    (0x8b, "LONG4"),
    (b'B', "BINBYTES"),
    (b'C', "SHORT_BINBYTES"),
    (0x8c, "SHORT_BINUNICODE"),
    (0x8d, "BINUNICODE8"),
    (0x8e, "BINBYTES8"),
    (0x8f, "EMPTY_SET"),
    (0x90, "ADDITEMS"),
    (0x91, "FROZENSET"),
    (0x92, "NEWOBJ_EX"),
    (0x93, "STACK_GLOBAL"),
    (0x94, "MEMOIZE"),
    (0x95, "FRAME"),
    (0x96, "BYTEARRAY8"),
    (0x97, "NEXT_BUFFER"),
    (0x98, "READONLY_BUFFER"),
];

fn op_name(op: u8) -> Option<&'static str> {
    OPCODES.iter().find(|(b, _)| *b == op).map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    const FR_P0: &[u8] = include_bytes!("../../tests/golden/pickle/fr_p0.pickle");
    const FR_P2: &[u8] = include_bytes!("../../tests/golden/pickle/fr_p2.pickle");
    const FR_P4: &[u8] = include_bytes!("../../tests/golden/pickle/fr_p4.pickle");
    const FR_P5: &[u8] = include_bytes!("../../tests/golden/pickle/fr_p5.pickle");
    const EXTRAS_P5: &[u8] = include_bytes!("../../tests/golden/pickle/extras_p5.pickle");
    const RECURSIVE_P0: &[u8] = include_bytes!("../../tests/golden/pickle/recursive_p0.pickle");
    const RECURSIVE_P2: &[u8] = include_bytes!("../../tests/golden/pickle/recursive_p2.pickle");
    const MANY_P2: &[u8] = include_bytes!("../../tests/golden/pickle/many_p2.pickle");
    const SYSTEM_P0: &[u8] = include_bytes!("../../tests/golden/pickle/system_p0.pickle");
    const SYSTEM_P4: &[u8] = include_bytes!("../../tests/golden/pickle/system_p4.pickle");
    const FR_DUMP: &str =
        "/work/shared/fixtures/hang/gloo_tp4_rank3_skips_allreduce/fr_during_hang/fr_trace_rank_3";

    fn parse(bytes: &[u8]) -> PickleDoc {
        load(bytes, PickleLimits::default()).expect("pickle loads")
    }

    fn error(bytes: &[u8]) -> Error {
        load(bytes, PickleLimits::default()).expect_err("pickle is refused")
    }

    fn message(bytes: &[u8]) -> String {
        error(bytes).message().to_owned()
    }

    fn ints(v: PickleValue<'_>) -> Vec<i64> {
        v.elements().map(|e| e.as_i64().expect("int")).collect()
    }

    fn check_fr(doc: &PickleDoc) {
        let root = doc.root();
        assert!(root.is_dict());
        let keys: Vec<_> = root.members().map(|(k, _)| k.as_str().unwrap()).collect();
        assert_eq!(keys, ["version", "pg_config", "pg_status", "entries"]);
        assert_eq!(root.get("version").unwrap().as_str(), Some("2.10"));
        let pg = root.get("pg_config").unwrap().get("0").unwrap();
        assert_eq!(pg.get("desc").unwrap().as_str(), Some("default_pg"));
        let status = root.get("pg_status").unwrap().get("0").unwrap();
        assert_eq!(
            status.get("last_completed_collective").unwrap().as_i64(),
            Some(26)
        );
        let entries = root.get("entries").unwrap();
        assert_eq!((entries.type_name(), entries.len()), ("list", Some(2)));
        let e = entries.element(0).unwrap();
        let frames = e.get("frames").unwrap();
        assert_eq!(frames.len(), Some(2));
        let f0 = frames.element(0).unwrap();
        assert_eq!(f0.get("name").unwrap().as_str(), Some("all_gather_single"));
        assert_eq!(f0.get("line").unwrap().as_i64(), Some(4387));
        let pg = e.get("process_group").unwrap();
        assert_eq!(pg.type_name(), "tuple");
        let names: Vec<_> = pg.elements().map(|x| x.as_str().unwrap()).collect();
        assert_eq!(names, ["2", "tp_pair_1"]);
        let int = |k: &str| e.get(k).unwrap().as_i64();
        let float = |k: &str| e.get(k).unwrap().as_f64().unwrap();
        assert_eq!(int("collective_seq_id"), Some(27));
        assert_eq!(int("time_created_ns"), Some(1_796_080_643_554_207_554));
        assert_eq!(int("neg"), Some(-123_456_789_012));
        assert_eq!(int("small_neg"), Some(-7));
        let (inputs, outputs) = (
            e.get("input_sizes").unwrap(),
            e.get("output_sizes").unwrap(),
        );
        assert_eq!(inputs.id(), outputs.id(), "shared through the memo");
        assert_eq!(ints(inputs.element(1).unwrap()), [2, 32768]);
        assert!(e.get("time_discovered_started_ns").unwrap().is_none());
        assert_eq!(e.get("retired").unwrap().as_bool(), Some(false));
        assert_eq!(e.get("is_p2p").unwrap().as_bool(), Some(true));
        assert_eq!(e.get("retired").unwrap().as_i64(), None);
        let big = e.get("big").unwrap();
        assert_eq!((big.type_name(), big.as_i64()), ("int", None));
        assert_eq!(
            big.as_bigint_le(),
            Some(&[0, 0, 0, 0, 0, 0, 0, 0, 0x40][..])
        );
        assert_eq!(big.as_f64(), Some(2f64.powi(70)));
        let neg_big = e.get("neg_big").unwrap();
        let mut expect = [0xff; 9];
        expect[8] = 0xbf;
        assert_eq!(neg_big.as_bigint_le(), Some(&expect[..]));
        assert_eq!(neg_big.as_f64(), Some(-(2f64.powi(70))));
        assert_eq!(float("duration_ms"), 1.5);
        assert_eq!(float("tiny"), -2.5e-300);
        assert_eq!(float("huge"), 1e308);
        assert_eq!(float("inf"), f64::INFINITY);
        let text = "caf\u{e9} \u{2713} \u{65e5}\u{672c} \u{1f600} back\\slash \"q\" 'a'\n";
        assert_eq!(e.get("text").unwrap().as_str(), Some(text));
        assert_eq!(e.get("empty").unwrap().as_str(), Some(""));
        let empty = e.get("empty_tuple").unwrap();
        assert_eq!((empty.type_name(), empty.len()), ("tuple", Some(0)));
        assert_eq!(ints(e.get("one_tuple").unwrap()), [1]);
        let three = e.get("three_tuple").unwrap();
        assert_eq!(three.element(1).unwrap().type_name(), "float");
        assert_eq!(three.element(2).unwrap().as_str(), Some("x"));
        assert_eq!(ints(e.get("four_tuple").unwrap()), [1, 2, 3, 4]);
        let many = entries.element(1).unwrap().get("ints").unwrap();
        assert_eq!(ints(many), (0..1200).collect::<Vec<_>>());
    }

    #[test]
    fn golden_fr_like_dicts_at_protocols_0_2_4_5() {
        for bytes in [FR_P0, FR_P2, FR_P4, FR_P5] {
            check_fr(&parse(bytes));
        }
    }

    #[test]
    fn golden_bytes_sets_and_batched_dict() {
        let doc = parse(EXTRAS_P5);
        let root = doc.root();
        assert_eq!(
            root.get("bytes").unwrap().as_bytes(),
            Some(&b"\x00\xffab"[..])
        );
        let array = root.get("bytearray").unwrap();
        assert_eq!(
            (array.type_name(), array.as_bytes()),
            ("bytes", Some(&b"xy"[..]))
        );
        let set = root.get("set").unwrap();
        assert_eq!((set.type_name(), ints(set)), ("set", vec![1, 2, 3]));
        let frozen = root.get("frozenset").unwrap();
        assert!(frozen.is_sequence());
        assert_eq!(frozen.element(0).unwrap().as_str(), Some("a"));
        let many = root.get("many").unwrap();
        assert_eq!(many.len(), Some(1100));
        assert_eq!(many.get("k1099").unwrap().as_i64(), Some(1099));
    }

    #[test]
    fn golden_recursive_tuple_pops_its_mark() {
        for bytes in [RECURSIVE_P0, RECURSIVE_P2] {
            let doc = parse(bytes);
            let root = doc.root();
            assert_eq!((root.type_name(), root.len()), ("tuple", Some(4)));
            let list = root.element(0).unwrap();
            assert_eq!(list.len(), Some(1));
            assert_eq!(list.element(0).unwrap().id(), root.id());
            assert_eq!(root.element(3).unwrap().as_i64(), Some(3));
        }
    }

    #[test]
    fn golden_long_memo_indices() {
        let doc = parse(MANY_P2);
        let root = doc.root();
        let names = root.element(0).unwrap();
        assert_eq!(names.len(), Some(300));
        assert_eq!(root.element(2).unwrap().id(), names.id());
        let last = root.element(1).unwrap();
        assert_eq!(last.as_str(), Some("k299"));
        assert_eq!(last.id(), names.element(299).unwrap().id());
    }

    #[test]
    fn refuses_os_system() {
        // `os.system` pickles as `posix.system` on Linux (its __module__).
        for bytes in [SYSTEM_P0, SYSTEM_P4] {
            let e = error(bytes);
            assert_eq!(e.kind(), ErrorKind::Invalid);
            assert!(
                e.message()
                    .starts_with("pickle: refuses global 'posix.system' at byte "),
                "{}",
                e.message()
            );
            assert!(e.message().ends_with(ONLY_PLAIN));
        }
        assert_eq!(
            message(b"cos\nsystem\n(S'echo hi'\ntR."),
            format!("pickle: refuses global 'os.system' at byte 0 {ONLY_PLAIN}")
        );
        let inst = message(b"(S'echo hi'\nios\nsystem\n.");
        assert!(
            inst.contains("refuses global 'os.system' at byte 12"),
            "{inst}"
        );
        // A global whose name is not printable is named by its opcode.
        assert!(message(b"cos\nsys\x07tem\n.").contains("refuses opcode GLOBAL"));
        assert!(message(b"\x80\x04K\x01K\x02\x93.").contains("refuses opcode STACK_GLOBAL"));
    }

    #[test]
    fn refuses_every_object_opcode() {
        let refused = [
            (b'R', "REDUCE"),
            (b'b', "BUILD"),
            (b'o', "OBJ"),
            (0x81, "NEWOBJ"),
            (0x92, "NEWOBJ_EX"),
            (0x82, "EXT1"),
            (0x83, "EXT2"),
            (0x84, "EXT4"),
            (b'P', "PERSID"),
            (b'Q', "BINPERSID"),
            (0x97, "NEXT_BUFFER"),
            (0x98, "READONLY_BUFFER"),
        ];
        for (op, name) in refused {
            let bytes = [0x80, 5, b'N', b'N', op, 1, 0, 0, 0, b'.'];
            assert_eq!(
                message(&bytes),
                format!("pickle: refuses opcode {name} at byte 4 {ONLY_PLAIN}")
            );
        }
        assert_eq!(message(b"\xff."), "pickle: unknown opcode 0xff at byte 0");
    }

    #[test]
    fn protocol_0_and_1_strings() {
        let doc = parse(b"S'a\\x41\\n\\'b'\np0\n.");
        assert_eq!(doc.root().as_str(), Some("aA\n'b"));
        assert_eq!(
            parse(b"S\"\\377\\0x\"\n.").root().as_bytes(),
            Some(&b"\xff\0x"[..])
        );
        assert_eq!(parse(b"T\x03\x00\x00\x00abc.").root().as_str(), Some("abc"));
        assert_eq!(parse(b"U\x02\xc3\xa9.").root().as_str(), Some("\u{e9}"));
        assert_eq!(parse(b"U\x01\xff.").root().as_bytes(), Some(&b"\xff"[..]));
        let raw = parse(b"V\\u0041\\\\u0042\xe9\\U0001f600\n.");
        assert_eq!(raw.root().as_str(), Some("A\\\\u0042\u{e9}\u{1f600}"));
        assert!(message(b"S'abc\n.").contains("not quoted"));
        assert!(message(b"V\\ud800\n.").contains("surrogate"));
        assert!(message(b"X\x01\x00\x00\x00\xff.").contains("BINUNICODE is not valid UTF-8"));
        assert!(message(b"T\xff\xff\xff\xff.").contains("negative length"));
    }

    #[test]
    fn binary_strings_and_bytes() {
        let hi = parse(b"\x80\x04\x8d\x02\x00\x00\x00\x00\x00\x00\x00hi.");
        assert_eq!(hi.root().as_str(), Some("hi"));
        let b = parse(b"\x80\x03B\x02\x00\x00\x00ab.");
        assert_eq!(b.root().as_bytes(), Some(&b"ab"[..]));
        let b8 = parse(b"\x80\x04\x8e\x01\x00\x00\x00\x00\x00\x00\x00z.");
        assert_eq!(b8.root().as_bytes(), Some(&b"z"[..]));
        let ba = parse(b"\x80\x05\x96\x00\x00\x00\x00\x00\x00\x00\x00.");
        assert_eq!(ba.root().as_bytes(), Some(&b""[..]));
    }

    #[test]
    fn integers_and_floats() {
        let i = |bytes: &[u8]| parse(bytes).root().as_i64();
        assert_eq!(i(b"I-5\n."), Some(-5));
        assert_eq!(parse(b"I01\n.").root().as_bool(), Some(true));
        assert_eq!(parse(b"I00\n.").root().as_bool(), Some(false));
        assert_eq!(i(b"L12L\n."), Some(12));
        assert_eq!(i(b"J\xfe\xff\xff\xff."), Some(-2));
        assert_eq!(i(b"M\xff\xff."), Some(65535));
        assert_eq!(i(b"\x8a\x00."), Some(0));
        assert_eq!(i(b"\x8a\x08\xff\xff\xff\xff\xff\xff\xff\xff."), Some(-1));
        assert_eq!(
            i(b"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80."),
            Some(i64::MIN)
        );
        assert_eq!(i(b"\x8a\x09\x01\x00\x00\x00\x00\x00\x00\x00\x00."), Some(1));
        assert_eq!(i(b"\x8b\x02\x00\x00\x00\xff\x7f."), Some(32767));
        let big = parse(b"L-9223372036854775809L\n.");
        assert_eq!(
            big.root().as_bigint_le(),
            Some(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff][..])
        );
        let long4 = parse(b"\x8b\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x40.");
        assert_eq!(long4.root().as_f64(), Some(2f64.powi(70)));
        assert_eq!(
            parse(b"I99999999999999999999\n.").root().as_f64(),
            Some(1e20)
        );
        assert!(message(b"I12x\n.").contains("bad INT argument"));
        let digits = format!("I{}\n.", "9".repeat(5000));
        assert!(message(digits.as_bytes()).contains("integer too large"));
        assert_eq!(parse(b"F-1.25e-3\n.").root().as_f64(), Some(-0.00125));
        assert!(parse(b"Fnan\n.").root().as_f64().unwrap().is_nan());
        assert_eq!(
            parse(b"G?\xf8\x00\x00\x00\x00\x00\x00.").root().as_f64(),
            Some(1.5)
        );
        assert!(message(b"Fx\n.").contains("bad FLOAT"));
    }

    #[test]
    fn bigint_helpers() {
        assert_eq!(
            decimal_to_le(false, b"1180591620717411303424"),
            [0, 0, 0, 0, 0, 0, 0, 0, 0x40]
        );
        assert_eq!(decimal_to_le(true, b"128"), [0x80]);
        assert_eq!(decimal_to_le(true, b"129"), [0x7f, 0xff]);
        // 2**200 + 2**147 + 1: the tie is broken upward by the sticky bit.
        let mut v = [0u8; 26];
        v[25] = 1;
        v[18] = 0x08;
        v[0] = 1;
        assert_eq!(bigint_to_f64(&v), Some(2f64.powi(200) + 2f64.powi(148)));
        v[0] = 0;
        assert_eq!(bigint_to_f64(&v), Some(2f64.powi(200)));
        let huge = [0x7f; 300];
        assert_eq!(bigint_to_f64(&huge), None);
    }

    #[test]
    fn containers_and_mutation() {
        // EMPTY_DICT MARK a 1 b 2 a 3 SETITEMS: the later `a` replaces in place.
        let doc = parse(b"\x80\x04}(\x8c\x01aK\x01\x8c\x01bK\x02\x8c\x01aK\x03u.");
        let items: Vec<_> = doc
            .root()
            .members()
            .map(|(k, v)| (k.as_str().unwrap(), v.as_i64().unwrap()))
            .collect();
        assert_eq!(items, [("a", 3), ("b", 2)]);
        // {1: 'x', True: 'y'} is {1: 'y'} in Python.
        let doc = parse(b"\x80\x04}(K\x01\x8c\x01x\x88\x8c\x01yu.");
        let (k, v) = doc.root().members().next().unwrap();
        assert_eq!(
            (doc.root().len(), k.as_i64(), v.as_str()),
            (Some(1), Some(1), Some("y"))
        );
        // A list appended to after two dict values refer to it.
        let doc = parse(b"\x80\x04]\x94}\x94(\x8c\x01ah\x00\x8c\x01bh\x00uh\x00K\x01a0.");
        let root = doc.root();
        assert_eq!(ints(root.get("a").unwrap()), [1]);
        assert_eq!(root.get("b").unwrap().id(), root.get("a").unwrap().id());
        // A set drops duplicates; LIST, DICT, TUPLE with marks.
        assert_eq!(
            ints(parse(b"\x80\x04\x8f(K\x01K\x01K\x02\x90.").root()),
            [1, 2]
        );
        assert_eq!(ints(parse(b"(I1\nI2\nl.").root()), [1, 2]);
        let d = parse(b"(S'k'\nI7\nd.");
        assert_eq!(d.root().get("k").unwrap().as_i64(), Some(7));
        let t = parse(b"(S'a'\nS'b'\ntS'c'\n0.");
        assert_eq!(t.root().len(), Some(2));
        // POP_MARK, DUP.
        assert_eq!(parse(b"N(NN1.").root().type_name(), "None");
        let dup = parse(b"]2a.");
        assert_eq!(dup.root().element(0).unwrap().id(), dup.root().id());
        // Appends to two memoized lists interleaved: chains of segments.
        let doc = parse(b"\x80\x04]\x94]\x94h\x00K\x01a0K\x02ah\x00K\x03a0\x86.");
        let pair: Vec<_> = doc.root().elements().map(ints).collect();
        assert_eq!(pair, [vec![1, 3], vec![2]]);
        // A dict of more than 64 items with a repeated key (hashed path).
        let mut bytes = b"\x80\x04}(".to_vec();
        for i in 0..70u8 {
            let key = format!("k{i}");
            bytes.extend_from_slice(&[0x8c, key.len() as u8]);
            bytes.extend_from_slice(key.as_bytes());
            bytes.extend_from_slice(&[b'K', i]);
        }
        bytes.extend_from_slice(b"\x8c\x02k5K\x63u.");
        let doc = parse(&bytes);
        let root = doc.root();
        assert_eq!(root.len(), Some(70));
        assert_eq!(root.get("k5").unwrap().as_i64(), Some(99));
        let (k, _) = root.members().nth(5).unwrap();
        assert_eq!(k.as_str(), Some("k5"));
        // A sparse PUT counts in len(memo), which MEMOIZE uses.
        let memo = parse(b"\x80\x04K\x07r\x05\x00\x00\x00K\x08\x94h\x01h\x05\x87.");
        assert_eq!(ints(memo.root()), [8, 8, 7]);
        assert!(message(b"}]K\x01s.").contains("unhashable list in SETITEM"));
        assert!(message(b"}K\x01a.").contains("APPEND onto a dict"));
        assert!(message(b"}(K\x01u.").contains("odd number of items"));
    }

    #[test]
    fn malformed_input_is_an_error_with_an_offset() {
        assert_eq!(
            message(b"a."),
            "pickle: stack underflow in APPEND at byte 0"
        );
        assert_eq!(
            message(b"\x80\x04N"),
            "pickle: truncated at byte 3 (no STOP opcode)"
        );
        assert_eq!(message(b""), "pickle: truncated at byte 0 (no STOP opcode)");
        assert_eq!(
            message(b"N.x"),
            "pickle: 1 bytes of trailing data at byte 2 after STOP"
        );
        assert_eq!(
            message(b"Nh\x05."),
            "pickle: BINGET of unknown memo index 5 at byte 1"
        );
        assert_eq!(
            message(b"Ng5\n."),
            "pickle: GET of unknown memo index 5 at byte 1"
        );
        assert_eq!(
            message(b"\x80\x06N."),
            "pickle: unsupported protocol 6 at byte 0"
        );
        assert_eq!(message(b"."), "pickle: stack underflow in STOP at byte 0");
        assert_eq!(message(b"N(."), "pickle: stack underflow in STOP at byte 2");
        assert_eq!(message(b"Ne."), "pickle: APPENDS without a MARK at byte 1");
        assert_eq!(
            message(b"(]e."),
            "pickle: stack underflow in APPENDS at byte 2"
        );
        assert_eq!(
            message(b"X\x28\x00\x00\x00abc"),
            "pickle: truncated at byte 5 (BINUNICODE needs 40 bytes, 3 left)"
        );
        assert_eq!(
            message(b"I12"),
            "pickle: truncated at byte 1 (INT needs a newline-terminated argument, 2 left)"
        );
    }

    #[test]
    fn huge_length_prefixes_are_refused_before_allocating() {
        let cases: [&[u8]; 8] = [
            b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xffab",
            b"\x80\x04\x8e\x00\x00\x00\x00\x00\x00\x00\x40ab",
            b"\x80\x05\x96\xff\xff\xff\xff\xff\xff\xff\x7fab",
            b"\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xffN.",
            b"\x80\x02\x8b\xff\xff\xff\x7fab",
            b"\x80\x02X\xff\xff\xff\xffab",
            b"\x80\x03B\xff\xff\xff\xffab",
            b"\x80\x02T\xff\xff\xff\x7fab",
        ];
        for bytes in cases {
            let m = message(bytes);
            assert!(m.starts_with("pickle: truncated at byte "), "{m}");
            assert!(m.ends_with(", 2 left)"), "{m}");
        }
    }

    #[test]
    fn limits_are_enforced() {
        let few = PickleLimits {
            max_nodes: 3,
            ..PickleLimits::default()
        };
        let e = load(b"(NNNNl.", few).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit);
        assert_eq!(
            e.message(),
            "pickle: more than max_nodes=3 values at byte 4"
        );
        let shallow = PickleLimits {
            max_depth: 3,
            ..PickleLimits::default()
        };
        let e = load(b"((((NNNNllll.", shallow).unwrap_err();
        assert_eq!(
            e.message(),
            "pickle: nesting deeper than max_depth=3 at byte 3"
        );
        assert!(load(b"]]]aa.", shallow).is_ok());
        let e = load(b"]]]]aaa.", shallow).unwrap_err();
        assert_eq!(
            e.message(),
            "pickle: nesting deeper than max_depth=3 at byte 6"
        );
        let e = load(b"))))\x85\x85\x85.", shallow).unwrap_err();
        assert_eq!(
            (e.kind(), e.message().contains("max_depth=3")),
            (ErrorKind::Limit, true)
        );
    }

    #[test]
    fn memo_bomb_costs_one_index_per_reference() {
        let n = 1_000_000;
        // A list appended to itself a million times.
        let mut bytes = b"\x80\x04]\x94(".to_vec();
        for _ in 0..n {
            bytes.extend_from_slice(b"h\x00");
        }
        bytes.extend_from_slice(b"e.");
        let doc = parse(&bytes);
        let root = doc.root();
        assert_eq!(root.len(), Some(n));
        assert!(root.elements().all(|e| e.id() == root.id()));
        assert_eq!(doc.node_count(), 1);
        // A 1000-element list referenced a million times.
        let mut bytes = b"\x80\x04](".to_vec();
        for i in 0..1000u16 {
            bytes.push(b'M');
            bytes.extend_from_slice(&i.to_le_bytes());
        }
        bytes.extend_from_slice(b"e\x94](");
        for _ in 0..n {
            bytes.extend_from_slice(b"h\x00");
        }
        bytes.extend_from_slice(b"e.");
        let doc = parse(&bytes);
        assert_eq!(doc.node_count(), 1002);
        let shared = doc.root().element(n - 1).unwrap();
        assert_eq!(shared.element(999).unwrap().as_i64(), Some(999));
    }

    #[test]
    fn every_truncation_is_an_error() {
        for bytes in [FR_P4, RECURSIVE_P0, RECURSIVE_P2] {
            for cut in 0..bytes.len() {
                let e = load(&bytes[..cut], PickleLimits::default()).unwrap_err();
                assert!(e.message().starts_with("pickle: "), "{}", e.message());
            }
        }
    }

    #[test]
    fn mutated_input_never_panics() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for base in [FR_P0, FR_P4, EXTRAS_P5, RECURSIVE_P2] {
            for _ in 0..600 {
                let mut bytes = base.to_vec();
                for _ in 0..1 + next() % 4 {
                    let at = (next() % bytes.len() as u64) as usize;
                    bytes[at] = next() as u8;
                }
                let _ = load(&bytes, PickleLimits::default());
            }
        }
    }

    #[test]
    fn real_flight_recorder_dump() {
        let Ok(bytes) = std::fs::read(FR_DUMP) else {
            return; // fixture not present on this machine
        };
        let doc = parse(&bytes);
        let root = doc.root();
        for key in ["version", "pg_config", "pg_status", "entries"] {
            assert!(root.get(key).is_some(), "missing {key}");
        }
        let entries = root.get("entries").unwrap();
        assert_eq!(entries.len(), Some(112));
        let last = entries.element(111).unwrap();
        assert_eq!(last.get("collective_seq_id").unwrap().as_i64(), Some(27));
        let pg = last.get("process_group").unwrap();
        assert_eq!(pg.type_name(), "tuple");
        let names: Vec<_> = pg.elements().map(|x| x.as_str().unwrap()).collect();
        assert_eq!(names, ["2", "tp_pair_1"]);
        let frames = last.get("frames").unwrap();
        assert_eq!(frames.type_name(), "list");
        assert!(!frames.is_empty());
        for frame in frames.elements() {
            assert!(frame.get("name").and_then(|v| v.as_str()).is_some());
            assert!(frame.get("filename").and_then(|v| v.as_str()).is_some());
            assert!(frame.get("line").and_then(|v| v.as_i64()).is_some());
        }
    }
}
