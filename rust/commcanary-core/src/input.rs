//! The bounded input reader every command uses.
//!
//! [`read_input`] reads a whole file, decompressing gzip (detected by its
//! magic bytes), and refuses more than a ceiling of bytes before and after
//! decompression: reading stops one byte past the ceiling, so a hostile file
//! (or a gzip bomb) never allocates more than the ceiling. Messages carry no
//! path; the caller adds it ([`crate::Error::with_path`]).

use std::io::Read;
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};

/// Largest artifact or (decompressed) trace any command reads: 4 GiB.
pub const MAX_INPUT_BYTES: u64 = 4 << 30;

/// Reads a whole input file, decompressing gzip, refusing more than `max` bytes.
///
/// # Errors
/// [`ErrorKind::Io`] for missing files, directories and read or gzip errors;
/// [`ErrorKind::Limit`] when the (decompressed) input exceeds `max`.
pub fn read_input(path: &Path, max: u64) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::new(ErrorKind::Io, "does not exist"),
        _ => Error::new(ErrorKind::Io, format!("cannot be read: {e}")),
    })?;
    if meta.is_dir() {
        return Err(Error::new(ErrorKind::Io, "is a directory, not a file"));
    }
    let file = std::fs::File::open(path)
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot be read: {e}")))?;
    let mut raw = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut raw)
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot be read: {e}")))?;
    if raw.len() as u64 > max {
        return Err(Error::limit(format!("exceeds max_input_bytes={max}")));
    }
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(raw.as_slice())
            .take(max.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| Error::new(ErrorKind::Io, format!("is not a valid gzip file: {e}")))?;
        if out.len() as u64 > max {
            return Err(Error::limit(format!(
                "decompresses beyond max_input_bytes={max}"
            )));
        }
        return Ok(out);
    }
    Ok(raw)
}
