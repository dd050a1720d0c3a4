//! The plugin's settings, read from the environment once, at the first
//! `init`.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `COMMCANARY_NCCL_DIR` | the log directory | `./commcanary-nccl-<job>` |
//! | `COMMCANARY_NCCL_EVENTS` | event types to ask NCCL for | group API, groups, coll/p2p, kernel channels |
//! | `COMMCANARY_NCCL_RING` | records per thread's ring | 16384 (2 MiB) |
//! | `COMMCANARY_NCCL_SEGMENT_MB` | a segment is sealed past this size | 64 |

use std::path::PathBuf;

use commcanary_nccl_log::event;

/// Default ring capacity, records.
pub const DEFAULT_RING: usize = 16_384;
/// Default segment size, MiB.
pub const DEFAULT_SEGMENT_MB: u64 = 64;

/// Settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Log directory.
    pub dir: PathBuf,
    /// Activation mask.
    pub mask: u32,
    /// Ring capacity, records.
    pub ring: usize,
    /// Seal a segment past this many bytes.
    pub segment_bytes: u64,
    /// Job id for the header.
    pub job: String,
    /// Problems with the settings, one line each (printed once).
    pub warnings: Vec<String>,
}

/// The job id: the launcher's run id when there is one.
fn job_id(var: &dyn Fn(&str) -> Option<String>) -> String {
    [
        "TORCHELASTIC_RUN_ID",
        "SLURM_JOB_ID",
        "PBS_JOBID",
        "LSB_JOBID",
        "COMMCANARY_JOB",
    ]
    .iter()
    .find_map(|k| var(k).filter(|v| !v.is_empty()))
    .unwrap_or_default()
}

impl Config {
    /// Reads the settings through `var` (the environment in the plugin).
    pub fn read(var: &dyn Fn(&str) -> Option<String>) -> Self {
        let mut warnings = Vec::new();
        let job = job_id(var);
        let dir = var("COMMCANARY_NCCL_DIR")
            .filter(|d| !d.is_empty())
            .map_or_else(
                || {
                    let safe: String = job
                        .chars()
                        .map(|c| {
                            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                                c
                            } else {
                                '_'
                            }
                        })
                        .take(64)
                        .collect();
                    PathBuf::from(if safe.is_empty() {
                        "commcanary-nccl".to_string()
                    } else {
                        format!("commcanary-nccl-{safe}")
                    })
                },
                PathBuf::from,
            );
        let mask = match var("COMMCANARY_NCCL_EVENTS").map(|t| event::parse_mask(&t)) {
            None => event::DEFAULT_MASK,
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                warnings.push(format!("COMMCANARY_NCCL_EVENTS: {e}; using the default"));
                event::DEFAULT_MASK
            }
        };
        let mut number = |name: &str, default: u64, low: u64, high: u64| -> u64 {
            match var(name).map(|t| t.trim().parse::<u64>()) {
                None => default,
                Some(Ok(n)) if (low..=high).contains(&n) => n,
                Some(_) => {
                    warnings.push(format!(
                        "{name}: not a number from {low} to {high}; using {default}"
                    ));
                    default
                }
            }
        };
        let ring = number("COMMCANARY_NCCL_RING", DEFAULT_RING as u64, 2, 1 << 20) as usize;
        let segment_mb = number("COMMCANARY_NCCL_SEGMENT_MB", DEFAULT_SEGMENT_MB, 1, 1 << 16);
        Self {
            dir,
            mask,
            ring,
            segment_bytes: segment_mb << 20,
            job,
            warnings,
        }
    }
}

/// An environment variable as text.
pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// An environment variable as an integer, −1 when unset or not one.
pub fn env_int(name: &str) -> i64 {
    env(name).and_then(|v| v.trim().parse().ok()).unwrap_or(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_default_and_refuse_nonsense_with_a_warning() {
        let none = |_: &str| None;
        let c = Config::read(&none);
        assert_eq!(c.dir, PathBuf::from("commcanary-nccl"));
        assert_eq!(c.mask, event::DEFAULT_MASK);
        let set = |k: &str| match k {
            "TORCHELASTIC_RUN_ID" => Some("run/7".to_string()),
            "COMMCANARY_NCCL_EVENTS" => Some("coll,nope".to_string()),
            "COMMCANARY_NCCL_RING" => Some("0".to_string()),
            _ => None,
        };
        let c = Config::read(&set);
        assert_eq!(c.dir, PathBuf::from("commcanary-nccl-run_7"));
        assert_eq!(c.ring, DEFAULT_RING);
        assert_eq!(c.warnings.len(), 2);
    }
}
