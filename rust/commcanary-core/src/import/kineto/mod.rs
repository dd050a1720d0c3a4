//! PyTorch profiler (Kineto) Chrome traces → `commcanary.trace.v1`.
//!
//! One reader, two writers. Every file is read by one streaming pass:
//! [`scan`] keeps what matters (and decides what a record is: control op,
//! nested duplicate, size, element type, group, kernels), [`header`] reads
//! `distributedInfo`. Then:
//! * [`single`] — one file as a one-rank profile, written as the reference
//!   single-file import ([`import_kineto`]: one event per NCCL
//!   `record_param_comms` record, its facts in the event's metadata);
//! * the job path — one or more files per rank, NCCL or gloo, merged into one
//!   event per collective instance with measured per-rank arrivals:
//!   [`profile::read_file`] reads each file, [`job::import_job`] joins windows,
//!   checks the files are one job, matches instances ([`align`]) and writes
//!   events ([`events`]).
//!
//! [`from_trace`] turns a merged `commcanary.trace.v1` back into the
//! aligned per-rank form the analyses read.
//!
//! [`files`] fingerprints a job's files and serves their profiles from the
//! on-disk cache ([`codec`] is the profile's byte form).
//! [`ops`] says what a call is; [`timeline`] holds the interval helpers.

pub mod align;
pub mod codec;
pub mod events;
pub mod files;
pub mod from_trace;
#[cfg(test)]
pub(crate) mod generated_jobs;
mod header;
pub mod job;
pub mod ops;
pub mod profile;
pub mod ranges;
mod scan;
pub mod shard;
pub mod sharded;
pub mod single;
pub mod timeline;

pub use events::PartialCollective;
pub use files::{
    CacheStats, FilePartial, Served, duplicate_error, profiles_each_from_partials,
    profiles_from_partials, read_each, read_files, read_one,
};
pub use from_trace::job_from_trace;
pub use job::{
    AlignedJob, JobCounts, JobImport, JobOptions, align_job, check_import_names, describe,
    import_aligned, import_job,
};
pub use profile::{RankProfile, Source, read_file};
pub use single::{KinetoCounts, KinetoImport, KinetoOptions, import_kineto};
