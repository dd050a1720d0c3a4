//! Reading a job's files: fingerprints, the rank-file-given-twice check, and
//! the per-file profile cache.
//!
//! Every file is fingerprinted (BLAKE3 of its bytes) first; two files with
//! the same fingerprint are the same rank given twice and are refused. With a
//! cache directory, a file whose profile is cached under its fingerprint and
//! this importer's version is not parsed at all; otherwise it is parsed and
//! its profile stored. Files are fingerprinted and parsed in parallel.
//!
//! Hashing a gigabyte costs more than everything else a cache hit does, so
//! the cache also remembers each file's fingerprint under its identity and
//! state on disk (path, device, inode, size, modification and status-change
//! times to the nanosecond, like git's index): a file whose state has not
//! changed is not read again. Any write to a file changes its status-change
//! time, so a changed file is always hashed anew.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::codec;
use super::profile::{RankProfile, Source, read_file};
use crate::error::{Error, Result};
use crate::import::cache::{BlobCache, CacheKey, Fingerprint, fingerprint};
use crate::import::stream::ScanLimits;

/// Version of the cached profile: bump whenever what a profile holds, or
/// how a file becomes one, changes.
pub const PROFILE_VERSION: u64 = 6;

/// How the cache served a read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Files whose profile came from the cache.
    pub hits: u64,
    /// Files parsed (and stored, when a cache is in use).
    pub parsed: u64,
    /// Entries that could not be written (the import went on).
    pub write_failures: u64,
}

/// The fingerprint of `path`, from `known` when the file's state on disk is
/// the one it was last hashed in.
fn remembered_fingerprint(path: &Path, known: Option<&BlobCache>) -> Result<Fingerprint> {
    let Some((known, state)) = known.zip(file_state(path)) else {
        return fingerprint(path);
    };
    let key = CacheKey {
        fingerprint: &state,
        parser: b"file-state",
    };
    if let Some(fp) = known
        .get(&key)
        .and_then(|b| Fingerprint::try_from(b.as_slice()).ok())
    {
        return Ok(fp);
    }
    let fp = fingerprint(path)?;
    let _ = known.put(&key, &fp);
    Ok(fp)
}

/// A digest of a file's identity and state on disk (`None` where the
/// platform does not tell them).
#[cfg(unix)]
fn file_state(path: &Path) -> Option<Fingerprint> {
    use std::os::unix::fs::MetadataExt;
    let absolute = std::fs::canonicalize(path).ok()?;
    let m = std::fs::metadata(&absolute).ok()?;
    let mut h = blake3::Hasher::new();
    h.update(absolute.as_os_str().as_encoded_bytes());
    for v in [m.dev(), m.ino(), m.size()] {
        h.update(&v.to_le_bytes());
    }
    for v in [m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()] {
        h.update(&v.to_le_bytes());
    }
    Some(*h.finalize().as_bytes())
}

#[cfg(not(unix))]
fn file_state(_path: &Path) -> Option<Fingerprint> {
    None
}

/// Reads every file of a job; `labels[i]` names `paths[i]` in messages.
/// `rank` stands in for a single file's missing `distributedInfo.rank`.
///
/// # Errors
/// Unreadable or invalid files (named), or two files with the same content.
pub fn read_files(
    paths: &[PathBuf],
    labels: &[String],
    rank: Option<i64>,
    cache_dir: Option<&Path>,
) -> Result<(Vec<RankProfile>, CacheStats)> {
    let (results, stats) = read_each(paths, labels, rank, cache_dir)?;
    let profiles = results.into_iter().collect::<Result<_>>()?;
    Ok((profiles, stats))
}

/// Reads every file of a job, each on its own: a damaged file is its own
/// error (named), the others are read. `labels[i]` names `paths[i]`.
///
/// # Errors
/// Two files with the same content (a file read twice is no damage of one).
pub fn read_each(
    paths: &[PathBuf],
    labels: &[String],
    rank: Option<i64>,
    cache_dir: Option<&Path>,
) -> Result<(Vec<Result<RankProfile>>, CacheStats)> {
    let named = |i: usize, e: Error| Error::new(e.kind(), e.with_path(&labels[i]));
    let known = cache_dir.map(|d| BlobCache::new(d, "file-fingerprints", PROFILE_VERSION));
    let fingerprints: Vec<Result<[u8; 32]>> = paths
        .par_iter()
        .enumerate()
        .map(|(i, p)| remembered_fingerprint(p, known.as_ref()).map_err(|e| named(i, e)))
        .collect();
    for i in 0..paths.len() {
        let Ok(fi) = &fingerprints[i] else { continue };
        if let Some(j) = (0..i).find(|&j| fingerprints[j].as_ref().is_ok_and(|fj| fj == fi)) {
            return Err(Error::invalid(format!(
                "{}: has the same content as {} (the same rank given twice?)",
                labels[i], labels[j]
            )));
        }
    }
    let cache = cache_dir.map(|d| BlobCache::new(d, "kineto-profiles", PROFILE_VERSION));
    let parser = format!("commcanary {} rank={rank:?}", env!("CARGO_PKG_VERSION"));
    let results: Vec<Result<(RankProfile, u8)>> = paths
        .par_iter()
        .enumerate()
        .map(|(i, p)| {
            let fingerprint = fingerprints[i].as_ref().map_err(Clone::clone)?;
            let key = CacheKey {
                fingerprint,
                parser: parser.as_bytes(),
            };
            let cached = cache
                .as_ref()
                .and_then(|c| c.get(&key))
                .and_then(|b| codec::decode(&b).ok());
            if let Some(profile) = cached {
                return Ok((profile, 0));
            }
            let profile = read_file(Source::Path(p), &ScanLimits::default(), rank)
                .map_err(|e| named(i, e))?;
            let stored = cache
                .as_ref()
                .map(|c| c.put(&key, &codec::encode(&profile)));
            Ok((profile, if matches!(stored, Some(Err(_))) { 2 } else { 1 }))
        })
        .collect();
    let mut stats = CacheStats::default();
    let mut profiles = Vec::with_capacity(results.len());
    for result in results {
        match result {
            Ok((profile, how)) => {
                match how {
                    0 => stats.hits += 1,
                    1 => stats.parsed += 1,
                    _ => {
                        stats.parsed += 1;
                        stats.write_failures += 1;
                    }
                }
                profiles.push(Ok(profile));
            }
            Err(e) => profiles.push(Err(e)),
        }
    }
    Ok((profiles, stats))
}
