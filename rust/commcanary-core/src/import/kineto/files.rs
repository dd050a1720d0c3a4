//! Reading a job's files: fingerprints, the rank-file-given-twice check, and
//! the per-file profile cache.
//!
//! Every file is fingerprinted (BLAKE3 of its bytes) first; two files with
//! the same fingerprint are the same rank given twice and are refused. With a
//! cache directory, a file whose profile is cached under its fingerprint and
//! this importer's version is not parsed at all; otherwise it is parsed and
//! its profile stored. Files are fingerprinted and parsed in parallel.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::codec;
use super::profile::{RankProfile, Source, read_file};
use crate::error::{Error, Result};
use crate::import::cache::{BlobCache, CacheKey, fingerprint};
use crate::import::stream::ScanLimits;

/// Version of the cached profile: bump whenever what a profile holds, or
/// how a file becomes one, changes.
pub const PROFILE_VERSION: u64 = 1;

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
    let named = |i: usize, e: Error| Error::new(e.kind(), e.with_path(&labels[i]));
    let fingerprints: Vec<[u8; 32]> = paths
        .par_iter()
        .enumerate()
        .map(|(i, p)| fingerprint(p).map_err(|e| named(i, e)))
        .collect::<Result<_>>()?;
    for i in 0..paths.len() {
        if let Some(j) = (0..i).find(|&j| fingerprints[j] == fingerprints[i]) {
            return Err(Error::invalid(format!(
                "{}: has the same content as {} (the same rank given twice?)",
                labels[i], labels[j]
            )));
        }
    }
    let cache = cache_dir.map(|d| BlobCache::new(d, "kineto-profiles", PROFILE_VERSION));
    let parser = format!("commcanary {} rank={rank:?}", env!("CARGO_PKG_VERSION"));
    let results: Vec<(RankProfile, u8)> = paths
        .par_iter()
        .enumerate()
        .map(|(i, p)| {
            let key = CacheKey {
                fingerprint: &fingerprints[i],
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
        .collect::<Result<_>>()?;
    let mut stats = CacheStats::default();
    let mut profiles = Vec::with_capacity(results.len());
    for (profile, how) in results {
        match how {
            0 => stats.hits += 1,
            1 => stats.parsed += 1,
            _ => {
                stats.parsed += 1;
                stats.write_failures += 1;
            }
        }
        profiles.push(profile);
    }
    Ok((profiles, stats))
}
