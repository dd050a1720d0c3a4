//! A content-addressed cache of parsed inputs, on disk.
//!
//! An entry is keyed by a BLAKE3 fingerprint of the input file's bytes and
//! the version of what parsed it ([`CacheKey`]), and lives at
//! `DIR/<namespace>/<2 hex>/<64 hex>.bin`. Its bytes are a header (magic,
//! format version, payload length, BLAKE3 digest of the payload) and the
//! payload. [`BlobCache::get`] returns the payload only when every header
//! field checks out, so a truncated, corrupted or foreign entry is a miss and
//! is rebuilt, never trusted. [`BlobCache::put`] writes to a temporary file in
//! the entry's directory and renames it into place, so a reader sees either no
//! entry or a whole one, and two processes filling the same entry at once
//! each install a complete copy (the last rename wins; both are equal).
//! Failing to write the cache is never an error of the import: `put`
//! reports it and the caller goes on.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};

const MAGIC: &[u8; 8] = b"CCCACHE1";
const HEADER: usize = 8 + 8 + 8 + 32;

/// The fingerprint of a file's bytes.
pub type Fingerprint = [u8; 32];

/// BLAKE3 of the file at `path`, read in 1 MiB blocks.
///
/// # Errors
/// The file cannot be read.
pub fn fingerprint(path: &Path) -> Result<Fingerprint> {
    let mut file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::new(ErrorKind::Io, "does not exist"),
        _ => Error::new(ErrorKind::Io, format!("cannot be read: {e}")),
    })?;
    let mut hasher = blake3::Hasher::new();
    let mut buffer = vec![0_u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot be read: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(*hasher.finalize().as_bytes())
}

/// Lowercase hex of `bytes`.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What an entry is keyed by.
#[derive(Debug, Clone, Copy)]
pub struct CacheKey<'a> {
    /// The input's fingerprint.
    pub fingerprint: &'a Fingerprint,
    /// What parsed it, and how (version and options), as bytes.
    pub parser: &'a [u8],
}

impl CacheKey<'_> {
    fn digest(&self) -> String {
        let mut h = blake3::Hasher::new();
        h.update(self.fingerprint);
        h.update(&(self.parser.len() as u64).to_le_bytes());
        h.update(self.parser);
        h.finalize().to_hex().to_string()
    }
}

/// A cache directory with one namespace.
#[derive(Debug, Clone)]
pub struct BlobCache {
    root: PathBuf,
    namespace: &'static str,
    version: u64,
}

impl BlobCache {
    /// The cache under `root`, for entries of `namespace` in format `version`.
    #[must_use]
    pub fn new(root: &Path, namespace: &'static str, version: u64) -> Self {
        Self {
            root: root.to_path_buf(),
            namespace,
            version,
        }
    }

    fn entry(&self, key: &CacheKey<'_>) -> PathBuf {
        let digest = key.digest();
        self.root
            .join(self.namespace)
            .join(&digest[..2])
            .join(format!("{digest}.bin"))
    }

    /// The payload stored under `key`, when there is a whole, valid entry.
    #[must_use]
    pub fn get(&self, key: &CacheKey<'_>) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.entry(key)).ok()?;
        if bytes.len() < HEADER || &bytes[..8] != MAGIC {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or([0; 8]));
        if word(8) != self.version || word(16) != (bytes.len() - HEADER) as u64 {
            return None;
        }
        let payload = &bytes[HEADER..];
        if blake3::hash(payload).as_bytes() != &bytes[24..56] {
            return None;
        }
        Some(payload.to_vec())
    }

    /// Stores `payload` under `key` (temp file, then rename).
    ///
    /// # Errors
    /// The directory or the entry cannot be written.
    pub fn put(&self, key: &CacheKey<'_>, payload: &[u8]) -> Result<()> {
        let path = self.entry(key);
        let dir = path.parent().unwrap_or(&self.root);
        let io = |e: std::io::Error| {
            Error::new(ErrorKind::Output, format!("cannot write the cache: {e}"))
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("entry");
        let unique = format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let tmp = dir.join(unique);
        let result = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(&self.version.to_le_bytes())?;
            f.write_all(&(payload.len() as u64).to_le_bytes())?;
            f.write_all(blake3::hash(payload).as_bytes())?;
            f.write_all(payload)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "commcanary-cache-test-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn hits_misses_and_damage() {
        let dir = temp_dir("basic");
        let cache = BlobCache::new(&dir, "t", 1);
        let fp = [7_u8; 32];
        let key = CacheKey {
            fingerprint: &fp,
            parser: b"v1",
        };
        assert!(cache.get(&key).is_none());
        cache.put(&key, b"payload").unwrap();
        assert_eq!(cache.get(&key).as_deref(), Some(&b"payload"[..]));
        let other = CacheKey {
            fingerprint: &fp,
            parser: b"v2",
        };
        assert!(cache.get(&other).is_none());
        assert!(BlobCache::new(&dir, "t", 2).get(&key).is_none());
        let path = cache.entry(&key);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(cache.get(&key).is_none(), "a flipped bit is a miss");
        std::fs::write(&path, &bytes[..HEADER + 2]).unwrap();
        assert!(cache.get(&key).is_none(), "a truncated entry is a miss");
        cache.put(&key, b"payload").unwrap();
        assert_eq!(cache.get(&key).as_deref(), Some(&b"payload"[..]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn concurrent_writers_leave_a_whole_entry() {
        let dir = temp_dir("race");
        let cache = BlobCache::new(&dir, "t", 1);
        let fp = [9_u8; 32];
        let payload: Vec<u8> = (0..200_000_u32).map(|i| i as u8).collect();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let key = CacheKey {
                        fingerprint: &fp,
                        parser: b"v",
                    };
                    for _ in 0..5 {
                        cache.put(&key, &payload).unwrap();
                        if let Some(got) = cache.get(&key) {
                            assert_eq!(got, payload);
                        }
                    }
                });
            }
        });
        let key = CacheKey {
            fingerprint: &fp,
            parser: b"v",
        };
        assert_eq!(cache.get(&key).unwrap(), payload);
        let leftovers = std::fs::read_dir(cache.entry(&key).parent().unwrap())
            .unwrap()
            .count();
        assert_eq!(leftovers, 1, "no temporary files left behind");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
