//! The bounded input reader every command uses.
//!
//! [`read_input`] reads a whole file, decompressing gzip (detected by its
//! magic bytes), under the resource policy ([`crate::limits::current`]):
//!
//! * no more than `max_input_bytes` before and after decompression: reading
//!   stops one byte past the bound, so a hostile file never allocates more;
//! * decompression is counted as it streams, and a stream that inflates more
//!   than `max_decompression_ratio` times its compressed bytes (once past
//!   [`crate::limits::DECOMPRESSION_RATIO_FLOOR`]) is refused at once, so a
//!   gzip bomb costs tens of MiB, not the byte bound;
//! * a large plain file is mapped, not read: the parser touches only the
//!   pages it reaches, so a document refused early (a 10^8-element list
//!   past a limit) costs what was read up to the refusal. A mapped file that
//!   another process truncates while it is read is outside this contract.
//!
//! Messages carry no path; the caller adds it ([`crate::Error::with_path`]).

use std::io::Read;
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};
use crate::limits::{self, Limits};

/// The bound callers pass for "the policy's `max_input_bytes`": no cap of
/// their own.
pub const MAX_INPUT_BYTES: u64 = u64::MAX;

/// Plain files at least this large are mapped rather than read.
const MAP_MIN_BYTES: u64 = 16 << 20;

/// Bytes decompressed between ratio checks.
const INFLATE_CHUNK: usize = 1 << 20;

/// The bytes of an input: read into memory or mapped.
pub enum InputBytes {
    /// Read (or decompressed) into memory.
    Owned(Vec<u8>),
    /// A plain file mapped read-only.
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for InputBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            InputBytes::Owned(v) => v,
            InputBytes::Mapped(m) => m,
        }
    }
}

impl InputBytes {
    /// The bytes as a vector (a copy when mapped).
    #[must_use]
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            InputBytes::Owned(v) => v,
            InputBytes::Mapped(m) => m.to_vec(),
        }
    }
}

/// Reads a whole input file, decompressing gzip, refusing more than `max`
/// bytes or the policy's `max_input_bytes`, whichever is smaller.
///
/// # Errors
/// [`ErrorKind::Io`] for missing files, directories and read or gzip errors;
/// [`ErrorKind::Limit`] when the (decompressed) input exceeds the bound or
/// inflates past the ratio.
pub fn read_input(path: &Path, max: u64) -> Result<InputBytes> {
    let policy = limits::current();
    let max = max.min(policy.max_input_bytes);
    let (meta, mut file) = open(path)?;
    let mut head = [0u8; 2];
    let got = file.read(&mut head).map_err(cannot)?;
    let gzip = got == 2 && head == [0x1f, 0x8b];
    if !gzip && meta.is_file() && meta.len() >= MAP_MIN_BYTES {
        return map(&file, meta.len(), max);
    }
    let mut raw = head[..got].to_vec();
    file.take(max.saturating_add(1).saturating_sub(got as u64))
        .read_to_end(&mut raw)
        .map_err(cannot)?;
    if raw.len() as u64 > max {
        return Err(too_big(max));
    }
    if gzip {
        return inflate(&raw, max, &policy).map(InputBytes::Owned);
    }
    Ok(InputBytes::Owned(raw))
}

/// Reads a file's bytes exactly as stored (gzip is not decompressed), under
/// the same bound as [`read_input`]: what a signature covers.
///
/// # Errors
/// As [`read_input`], less the gzip errors.
pub fn read_stored(path: &Path, max: u64) -> Result<InputBytes> {
    let max = max.min(limits::current().max_input_bytes);
    let (meta, file) = open(path)?;
    if meta.is_file() && meta.len() >= MAP_MIN_BYTES {
        return map(&file, meta.len(), max);
    }
    let mut raw = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut raw)
        .map_err(cannot)?;
    if raw.len() as u64 > max {
        return Err(too_big(max));
    }
    Ok(InputBytes::Owned(raw))
}

fn cannot(e: std::io::Error) -> Error {
    Error::new(ErrorKind::Io, format!("cannot be read: {e}"))
}

/// Opens `path` for reading, refusing a missing file and a directory.
fn open(path: &Path) -> Result<(std::fs::Metadata, std::fs::File)> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::new(ErrorKind::Io, "does not exist"),
        _ => cannot(e),
    })?;
    if meta.is_dir() {
        return Err(Error::new(ErrorKind::Io, "is a directory, not a file"));
    }
    let file = std::fs::File::open(path).map_err(cannot)?;
    Ok((meta, file))
}

/// Maps a plain file of `len` bytes, refusing one larger than `max`.
fn map(file: &std::fs::File, len: u64, max: u64) -> Result<InputBytes> {
    if len > max {
        return Err(too_big(max));
    }
    // SAFETY: the map is read-only and private to this process; the
    // module's contract excludes files truncated while they are read.
    // The one unsafe block of the workspace (docs/decisions.md).
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(file) }.map_err(cannot)?;
    Ok(InputBytes::Mapped(map))
}

fn too_big(max: u64) -> Error {
    Error::limit(format!(
        "exceeds max_input_bytes={max} {}",
        limits::hint("max_input_bytes")
    ))
}

/// Decompresses `raw` (one or more gzip members) chunk by chunk, checking
/// the byte bound and the ratio of output to compressed input consumed.
fn inflate(raw: &[u8], max: u64, policy: &Limits) -> Result<Vec<u8>> {
    let consumed = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let mut decoder = flate2::read::MultiGzDecoder::new(Counting::new(raw, &consumed));
    let mut out: Vec<u8> = Vec::new();
    loop {
        let start = out.len();
        let take = (INFLATE_CHUNK as u64).min(max.saturating_add(1) - start as u64);
        out.resize(start + take as usize, 0);
        let n = read_full(&mut decoder, &mut out[start..])?;
        out.truncate(start + n);
        if out.len() as u64 > max {
            return Err(Error::limit(format!(
                "decompresses beyond max_input_bytes={max} {}",
                limits::hint("max_input_bytes")
            )));
        }
        limits::check_ratio(consumed.get(), out.len() as u64, policy)?;
        if n < take as usize {
            return Ok(out);
        }
    }
}

/// Fills `buf` from `r` until it is full or the stream ends.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!("is not a valid gzip file: {e}"),
                ));
            }
        }
    }
    Ok(filled)
}

/// A reader that counts the bytes it hands out into a shared cell (the
/// compressed bytes a decoder has consumed, for the ratio check).
pub(crate) struct Counting<R> {
    inner: R,
    count: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R> Counting<R> {
    /// `inner`, counting into `count`.
    pub(crate) fn new(inner: R, count: &std::rc::Rc<std::cell::Cell<u64>>) -> Self {
        Self {
            inner,
            count: std::rc::Rc::clone(count),
        }
    }
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn a_gzip_bomb_is_refused_near_the_floor() {
        let dir = std::env::temp_dir().join(format!("cc-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bomb.gz");
        std::fs::write(&path, gz(&vec![b' '; 256 << 20])).unwrap();
        let err = read_input(&path, MAX_INPUT_BYTES).err().unwrap();
        assert!(
            err.to_string().contains("max_decompression_ratio=200"),
            "{err}"
        );
        let honest = dir.join("honest.gz");
        std::fs::write(&honest, gz(b"{\"format\": 1}")).unwrap();
        assert_eq!(
            &*read_input(&honest, MAX_INPUT_BYTES).unwrap(),
            b"{\"format\": 1}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_byte_bound_holds_before_and_after_decompression() {
        let dir = std::env::temp_dir().join(format!("cc-input-b-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plain = dir.join("plain.json");
        std::fs::write(&plain, vec![b' '; 100]).unwrap();
        assert!(read_input(&plain, 99).is_err());
        assert_eq!(read_input(&plain, 100).unwrap().len(), 100);
        let packed = dir.join("packed.gz");
        std::fs::write(&packed, gz(&[b'x'; 100])).unwrap();
        let err = read_input(&packed, 99).err().unwrap();
        assert!(err.to_string().contains("max_input_bytes=99"), "{err}");
        assert_eq!(read_input(&packed, 100).unwrap().len(), 100);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
