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

/// The error for two files of one job with the same content, if any: the
/// first file whose fingerprint an earlier file has. `None` fingerprints
/// (files that could not be read) take no part.
#[must_use]
pub fn duplicate_error(fingerprints: &[Option<&Fingerprint>], labels: &[String]) -> Option<Error> {
    for (i, fi) in fingerprints.iter().enumerate() {
        let Some(fi) = fi else { continue };
        if let Some(j) = (0..i).find(|&j| fingerprints[j] == Some(*fi)) {
            return Some(Error::invalid(format!(
                "{}: has the same content as {} (the same rank given twice?)",
                labels[i], labels[j]
            )));
        }
    }
    None
}

/// How one file's profile was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// From the cache.
    Hit,
    /// Parsed (and stored, when a cache is in use).
    Parsed,
    /// Parsed; storing it in the cache failed (the import went on).
    ParsedUnstored,
}

impl Served {
    /// The name a distributed task reports (`hit`, `parsed`,
    /// `parsed-unstored`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Served::Hit => "hit",
            Served::Parsed => "parsed",
            Served::ParsedUnstored => "parsed-unstored",
        }
    }

    /// The value [`Served::name`] names (`parsed` for anything else).
    #[must_use]
    pub fn from_name(name: &str) -> Served {
        match name {
            "hit" => Served::Hit,
            "parsed-unstored" => Served::ParsedUnstored,
            _ => Served::Parsed,
        }
    }
}

/// One file's read as a distributed task returns it ([`read_one`], the
/// profile sent in [`codec`] bytes and decoded on arrival,
/// [`FilePartial::decoded`]): its fingerprint when it could be taken, and
/// its profile or the file's one-line error.
#[derive(Debug, Clone)]
pub struct FilePartial {
    /// BLAKE3 of the file's bytes.
    pub fingerprint: Option<Fingerprint>,
    /// The profile and how it was served, or the error (naming the file).
    pub profile: std::result::Result<(RankProfile, Served), String>,
}

impl FilePartial {
    /// A partial from what a task sent: the fingerprint's bytes, the encoded
    /// profile or the error line, and how the profile was served. Bytes that
    /// do not decode become the file's error, naming `label`.
    #[must_use]
    pub fn decoded(
        label: &str,
        fingerprint: Option<&[u8]>,
        profile: std::result::Result<&[u8], String>,
        served: &str,
    ) -> FilePartial {
        FilePartial {
            fingerprint: fingerprint.and_then(|b| Fingerprint::try_from(b).ok()),
            profile: profile.and_then(|bytes| {
                codec::decode(bytes)
                    .map(|p| (p, Served::from_name(served)))
                    .map_err(|e| format!("{label}: a damaged partial ({})", e.message()))
            }),
        }
    }
}

/// A job's profiles from its files' partials (in file order), with the
/// checks and errors [`read_files`] has, in its order: two files with the
/// same content first, then the first file that could not be read.
///
/// # Errors
/// As [`read_files`].
pub fn profiles_from_partials(
    partials: Vec<FilePartial>,
    labels: &[String],
) -> Result<(Vec<RankProfile>, CacheStats)> {
    let (each, stats) = profiles_each_from_partials(partials, labels)?;
    Ok((each.into_iter().collect::<Result<_>>()?, stats))
}

/// Each file's profile from its partial, as [`read_each`] gives them: a
/// file that could not be read is its own error (its one line).
///
/// # Errors
/// Two files with the same content.
pub fn profiles_each_from_partials(
    partials: Vec<FilePartial>,
    labels: &[String],
) -> Result<(Vec<Result<RankProfile>>, CacheStats)> {
    if partials.len() != labels.len() {
        return Err(Error::internal("one partial per file"));
    }
    let seen: Vec<Option<&Fingerprint>> = partials.iter().map(|p| p.fingerprint.as_ref()).collect();
    if let Some(e) = duplicate_error(&seen, labels) {
        return Err(e);
    }
    let mut stats = CacheStats::default();
    let each = partials
        .into_iter()
        .map(|partial| {
            let (profile, served) = partial.profile.map_err(Error::invalid)?;
            stats.count(served);
            Ok(profile)
        })
        .collect();
    Ok((each, stats))
}

impl CacheStats {
    /// Counts one file's read.
    pub fn count(&mut self, served: Served) {
        match served {
            Served::Hit => self.hits += 1,
            Served::Parsed => self.parsed += 1,
            Served::ParsedUnstored => {
                self.parsed += 1;
                self.write_failures += 1;
            }
        }
    }
}

/// One file's profile (its fingerprint known), from the cache or parsed;
/// errors name `label`.
fn profile_of(
    path: &Path,
    label: &str,
    fingerprint: &Fingerprint,
    rank: Option<i64>,
    cache: Option<&BlobCache>,
) -> Result<(RankProfile, Served)> {
    let parser = format!("commcanary {} rank={rank:?}", env!("CARGO_PKG_VERSION"));
    let key = CacheKey {
        fingerprint,
        parser: parser.as_bytes(),
    };
    if let Some(profile) = cache
        .and_then(|c| c.get(&key))
        .and_then(|b| codec::decode(&b).ok())
    {
        return Ok((profile, Served::Hit));
    }
    let profile = read_file(Source::Path(path), &ScanLimits::default(), rank)
        .map_err(|e| Error::new(e.kind(), e.with_path(label)))?;
    let stored = cache.map(|c| c.put(&key, &codec::encode(&profile)));
    let served = if matches!(stored, Some(Err(_))) {
        Served::ParsedUnstored
    } else {
        Served::Parsed
    };
    Ok((profile, served))
}

/// One file of a job read on its own (a distributed task): its fingerprint,
/// then, when that could be taken, its profile. Errors name `label`. The
/// job's checks across files ([`duplicate_error`]) are the caller's.
pub fn read_one(
    path: &Path,
    label: &str,
    rank: Option<i64>,
    cache_dir: Option<&Path>,
) -> (Result<Fingerprint>, Result<(RankProfile, Served)>) {
    let known = cache_dir.map(|d| BlobCache::new(d, "file-fingerprints", PROFILE_VERSION));
    let fingerprint = remembered_fingerprint(path, known.as_ref())
        .map_err(|e| Error::new(e.kind(), e.with_path(label)));
    let profile = match &fingerprint {
        Ok(fp) => {
            let cache = cache_dir.map(|d| BlobCache::new(d, "kineto-profiles", PROFILE_VERSION));
            profile_of(path, label, fp, rank, cache.as_ref())
        }
        Err(e) => Err(e.clone()),
    };
    (fingerprint, profile)
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
    let fingerprints: Vec<Result<Fingerprint>> = paths
        .par_iter()
        .enumerate()
        .map(|(i, p)| remembered_fingerprint(p, known.as_ref()).map_err(|e| named(i, e)))
        .collect();
    let seen: Vec<Option<&Fingerprint>> = fingerprints.iter().map(|f| f.as_ref().ok()).collect();
    if let Some(e) = duplicate_error(&seen, labels) {
        return Err(e);
    }
    let cache = cache_dir.map(|d| BlobCache::new(d, "kineto-profiles", PROFILE_VERSION));
    let results: Vec<Result<(RankProfile, Served)>> = paths
        .par_iter()
        .enumerate()
        .map(|(i, p)| {
            let fingerprint = fingerprints[i].as_ref().map_err(Clone::clone)?;
            profile_of(p, &labels[i], fingerprint, rank, cache.as_ref())
        })
        .collect();
    let mut stats = CacheStats::default();
    let profiles = results
        .into_iter()
        .map(|r| {
            r.map(|(profile, served)| {
                stats.count(served);
                profile
            })
        })
        .collect();
    Ok((profiles, stats))
}
