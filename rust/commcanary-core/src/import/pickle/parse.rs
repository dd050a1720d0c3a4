//! The pickle machine: opcodes executed onto a value stack; containers
//! written straight into the document's child list.
//!
//! A list, dict or set owns one run of `children`. Items are appended in
//! place when the run ends the list (the common case: a pickler fills a
//! container right after building it) or fits its reserved capacity;
//! otherwise the run moves to the end with twice the room, so appends to
//! interleaved containers cost amortised O(1). Duplicate keys of small
//! dicts and sets are dropped as they arrive; large ones are deduplicated
//! at STOP.

#![allow(clippy::wildcard_imports)]

use rustc_hash::FxHashMap;

use super::text::*;
use super::*;
use crate::error::{Error, Result};

/// Which kind of mutable container an opcode builds or extends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Dict,
    Set,
}

impl Kind {
    /// Child indices per item: 2 for a dict's key and value.
    fn width(self) -> usize {
        if self == Kind::Dict { 2 } else { 1 }
    }
}

/// Dicts and sets of at most this many items drop duplicate keys as items
/// arrive (a scan behind a bit filter); larger ones once, at STOP, through
/// a hash map.
const SMALL: usize = 64;

pub(super) struct Parser<'b> {
    input: &'b [u8],
    pos: usize,
    /// Offset and byte of the opcode being executed.
    op_at: usize,
    op: u8,
    max_nodes: u64,
    max_depth: u32,
    nodes: Vec<Node>,
    children: Vec<u32>,
    arena: Vec<u8>,
    stack: Vec<u32>,
    /// Stack lengths at each open MARK.
    marks: Vec<usize>,
    /// `marks.last()`, or 0: items below it are hidden.
    floor: usize,
    /// The memo: indices `0..memo.len()` densely, any others in `sparse`.
    memo: Vec<u32>,
    sparse: FxHashMap<u32, u32>,
    /// Reserved run length (child indices) of containers that moved.
    caps: FxHashMap<u32, u32>,
    /// Dicts and sets grown past [`SMALL`] items, deduplicated at STOP.
    deferred: Vec<u32>,
    /// Key sequences (node ids in order, by hash) of small dicts and sets
    /// found free of duplicates: a container with the same keys, like
    /// every entry of a dump, needs no check. At most [`KNOWN_KEY_SETS`].
    unique_keys: FxHashMap<u64, Box<[u32]>>,
}

/// Most key sequences remembered in `Parser::unique_keys`.
const KNOWN_KEY_SETS: usize = 64;

impl<'b> Parser<'b> {
    pub(super) fn new(input: &'b [u8], limits: PickleLimits) -> Self {
        let guess = (input.len() / 4).min(1 << 20);
        Self {
            input,
            pos: 0,
            op_at: 0,
            op: 0,
            max_nodes: limits.max_nodes.min(u64::from(NIL - 1)),
            max_depth: limits.max_depth.min(u32::from(u16::MAX - 1)),
            nodes: Vec::with_capacity(guess),
            children: Vec::with_capacity((input.len() / 2).min(1 << 22)),
            arena: Vec::with_capacity((input.len() / 8).min(1 << 22)),
            stack: Vec::with_capacity(64),
            marks: Vec::new(),
            floor: 0,
            memo: Vec::with_capacity(guess / 2),
            sparse: FxHashMap::default(),
            caps: FxHashMap::default(),
            deferred: Vec::new(),
            unique_keys: FxHashMap::default(),
        }
    }

    pub(super) fn run(mut self) -> Result<PickleDoc> {
        let input = self.input;
        loop {
            let at = self.pos;
            let Some(&op) = input.get(at) else {
                return Err(Error::invalid(format!(
                    "pickle: truncated at byte {at} (no STOP opcode)"
                )));
            };
            self.op_at = at;
            self.op = op;
            self.pos = at + 1;
            // The opcodes a pickler writes most, dispatched here directly.
            match op {
                b'h' => {
                    let i = self.byte()?;
                    self.memo_get(u32::from(i))?;
                }
                0x94 => self.memoize()?,
                b'K' => {
                    let v = self.byte()?;
                    self.push(Node::Int(i64::from(v)))?;
                }
                b'M' => {
                    let v = self.uint(2)?;
                    self.push(Node::Int(v as i64))?;
                }
                b'(' => self.open_mark()?,
                b']' => self.build(Kind::List, self.stack.len())?,
                b'}' => self.build(Kind::Dict, self.stack.len())?,
                b'a' | b'e' | b'u' => self.container_op(op)?,
                b'.' => break,
                _ => self.step(op)?,
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

    /// Executes one opcode other than STOP.
    fn step(&mut self, op: u8) -> Result<()> {
        match op {
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
        Ok(())
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

    /// The next byte.
    #[inline(always)]
    fn byte(&mut self) -> Result<u8> {
        match self.input.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(self.truncated("1 bytes")),
        }
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
    #[inline(always)]
    fn floor(&self) -> usize {
        self.floor
    }

    /// MARK.
    #[inline]
    fn open_mark(&mut self) -> Result<()> {
        if self.marks.len() >= self.max_depth as usize {
            return Err(self.depth_error());
        }
        self.floor = self.stack.len();
        self.marks.push(self.floor);
        Ok(())
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
    #[inline]
    fn pop_mark(&mut self) -> Result<usize> {
        match self.marks.pop() {
            Some(at) => {
                self.floor = self.marks.last().copied().unwrap_or(0);
                Ok(at)
            }
            None => Err(self.bad(format_args!("{} without a MARK", self.name()))),
        }
    }

    /// Adds a value (not pushed).
    #[inline]
    fn add(&mut self, node: Node) -> Result<u32> {
        if self.nodes.len() as u64 >= self.max_nodes {
            return Err(self.too_many_nodes());
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(node);
        Ok(id)
    }

    #[cold]
    #[inline(never)]
    fn too_many_nodes(&self) -> Error {
        Error::limit(format!(
            "pickle: more than max_nodes={} values at byte {}",
            self.max_nodes, self.op_at
        ))
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
            b'(' => self.open_mark()?,
            // POP with nothing above the MARK pops the MARK (protocol 0
            // pickles of recursive tuples rely on it).
            b'0' if self.stack.len() <= self.floor() && !self.marks.is_empty() => {
                self.pop_mark()?;
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
            0x94 => self.memoize(),
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

    /// MEMOIZE: the top of the stack at index `len(memo)`.
    #[inline]
    fn memoize(&mut self) -> Result<()> {
        if self.sparse.is_empty() {
            let id = self.top()?;
            self.memo.push(id);
            return Ok(());
        }
        match u32::try_from(self.memo_len()) {
            Ok(i) => self.memo_put(i),
            Err(_) => Err(self.bad("memo full")),
        }
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

    fn depth_of(&self, id: u32) -> u32 {
        match self.nodes.get(id as usize) {
            Some(Node::List(s) | Node::Tuple(s) | Node::Set(s) | Node::Dict(s)) => s.depth,
            _ => 0,
        }
    }

    /// Depth of a tuple holding `kids`.
    fn tuple_depth(&self, kids: &[u32]) -> Result<u32> {
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
    #[inline]
    fn build(&mut self, kind: Kind, from: usize) -> Result<()> {
        let first = self.children.len() as u32;
        let node = |f: fn(Seq) -> Node| {
            f(Seq {
                first,
                len: 0,
                depth: 1,
            })
        };
        let id = self.add(match kind {
            Kind::List => node(Node::List),
            Kind::Dict => node(Node::Dict),
            Kind::Set => node(Node::Set),
        })?;
        self.stack.push(id);
        if from + 1 < self.stack.len() {
            // The items sit below the new container: move it to the end.
            let items = self.stack.len() - 1;
            self.stack.copy_within(from..items, from + 1);
            self.stack[from] = id;
            self.extend(kind, from)?;
        }
        Ok(())
    }

    /// Moves `stack[at + 1..]` into the container at `stack[at]`, which must
    /// be a `kind`.
    #[inline]
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
        if kids.is_empty() {
            return Ok(());
        }
        let width = kind.width();
        if kids.len() % width != 0 {
            return Err(self.bad(format_args!("{} with an odd number of items", self.name())));
        }
        let depth = self.scan_items(kind, kids, target)?.max(seq.depth);
        let had = seq.len as usize;
        let old = had * width;
        let first = self.store(target, seq.first as usize, old, from);
        let end = first + old + (self.stack.len() - from);
        self.stack.truncate(from);
        let mut len = end - first;
        if kind != Kind::List {
            if len > width && len <= SMALL * width {
                len = self.drop_duplicates(first, end, width);
                if end == self.children.len() {
                    self.children.truncate(first + len);
                }
            } else if had <= SMALL {
                self.deferred.push(target);
            }
        }
        if let Some(Node::List(s) | Node::Dict(s) | Node::Set(s)) =
            self.nodes.get_mut(target as usize)
        {
            *s = Seq {
                first: first as u32,
                len: (len / width) as u32,
                depth,
            };
        }
        Ok(())
    }

    /// Drops duplicate keys from the small run `children[first..end]` (groups
    /// of `width`) unless its key sequence is known to be free of them;
    /// returns the child indices kept.
    fn drop_duplicates(&mut self, first: usize, end: usize, width: usize) -> usize {
        let Some(run) = self.children.get_mut(first..end) else {
            return 0;
        };
        let keys = || run.iter().step_by(width).copied();
        let hash = keys().fold(0u64, |h, k| {
            (h.rotate_left(5) ^ u64::from(k)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        });
        if let Some(known) = self.unique_keys.get(&hash) {
            if known.iter().copied().eq(keys()) {
                return run.len();
            }
        }
        let kept = dedup_small(&self.nodes, &self.arena, run, width);
        if kept == run.len() {
            if self.unique_keys.len() >= KNOWN_KEY_SETS {
                self.unique_keys.clear();
            }
            let known: Box<[u32]> = run.iter().step_by(width).copied().collect();
            self.unique_keys.insert(hash, known);
        }
        kept
    }

    /// Writes `stack[from..]` after the `old` child indices of `target`'s
    /// run at `first`; returns where the run now starts.
    fn store(&mut self, target: u32, first: usize, old: usize, from: usize) -> usize {
        let kids = self.stack.get(from..).unwrap_or(&[]);
        let end = first + old;
        if old == 0 || end == self.children.len() {
            let first = if old == 0 { self.children.len() } else { first };
            match kids {
                [one] => self.children.push(*one),
                _ => self.children.extend_from_slice(kids),
            }
            return first;
        }
        let cap = self
            .caps
            .get(&target)
            .map_or(old, |&c| (c as usize).max(old));
        if let Some(room) = self
            .children
            .get_mut(end..end + kids.len())
            .filter(|_| old + kids.len() <= cap)
        {
            room.copy_from_slice(kids);
            return first;
        }
        // Move to the end with twice the room.
        let cap = 2 * (old + kids.len());
        let moved = self.children.len();
        self.children.extend_from_within(first..end);
        self.children.extend_from_slice(kids);
        self.children.resize(moved + cap, NIL);
        self.caps.insert(target, cap as u32);
        moved
    }

    /// The depth of container `target` holding `kids` (ignoring `target`
    /// itself); refuses lists, dicts and sets as dict keys or set elements
    /// (Python raises `TypeError: unhashable type`).
    #[inline]
    fn scan_items(&self, kind: Kind, kids: &[u32], target: u32) -> Result<u32> {
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

    // ---- the end --------------------------------------------------------

    /// Drops duplicate keys of the large dicts and sets.
    fn finish(self, root: u32) -> PickleDoc {
        let Parser {
            mut nodes,
            mut children,
            arena,
            deferred,
            ..
        } = self;
        let mut index = FxHashMap::default();
        let mut kept = Vec::new();
        for id in deferred {
            let (seq, width) = match nodes.get(id as usize) {
                Some(Node::Dict(s)) => (*s, 2),
                Some(Node::Set(s)) => (*s, 1),
                _ => continue,
            };
            let first = seq.first as usize;
            let Some(run) = children.get_mut(first..first + width * seq.len as usize) else {
                continue;
            };
            kept.clear();
            dedup_large(&nodes, &arena, run, width, &mut kept, &mut index);
            run.get_mut(..kept.len())
                .unwrap_or_default()
                .copy_from_slice(&kept);
            if let Some(Node::Dict(s) | Node::Set(s)) = nodes.get_mut(id as usize) {
                s.len = (kept.len() / width) as u32;
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

/// Copies the items of `run` (groups of `width`: 2 for dict pairs) into
/// `out`, a later group whose first item equals an earlier one's replacing
/// its value in place.
fn dedup_large<'a>(
    nodes: &[Node],
    arena: &'a [u8],
    run: &[u32],
    width: usize,
    out: &mut Vec<u32>,
    index: &mut FxHashMap<Key<'a>, usize>,
) {
    index.clear();
    for group in run.chunks_exact(width) {
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

/// Drops duplicate keys from `run` (at most [`SMALL`] groups of `width`) in
/// place and returns the child indices kept: a 256-bit filter of seen
/// keys, and a scan only when the filter says the key may be there.
fn dedup_small(nodes: &[Node], arena: &[u8], run: &mut [u32], width: usize) -> usize {
    let mut kept = 0;
    let mut seen = [0u64; 4];
    for at in (0..run.len()).step_by(width) {
        if let Some(key) = key_of(nodes, arena, run[at]) {
            let h = key.quick_hash() >> 56;
            let (word, bit) = ((h >> 6) as usize & 3, 1u64 << (h & 63));
            if seen[word] & bit != 0 {
                let same = (0..kept)
                    .step_by(width)
                    .find(|&k| run[k] == run[at] || key_of(nodes, arena, run[k]) == Some(key));
                if let Some(k) = same {
                    run.copy_within(at + 1..at + width, k + 1);
                    continue;
                }
            }
            seen[word] |= bit;
        }
        run.copy_within(at..at + width, kept);
        kept += width;
    }
    kept
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
