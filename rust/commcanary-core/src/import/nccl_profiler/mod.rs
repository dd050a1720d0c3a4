//! The NCCL profiler plugin's logs (`libnccl-profiler-commcanary.so`) →
//! per-process operations → `commcanary.trace.v1`.
//!
//! * [`logs`]: a directory's segment files, grouped by process (host, pid),
//!   read with the format crate `commcanary-nccl-log`; damage before a
//!   segment's last frame is an error naming the file, a cut last frame is
//!   skipped and counted.
//! * [`ops`]: one process's records joined by handle into collectives and
//!   point-to-point operations: enqueue times, completion inferred from their
//!   children (kernel channels, proxy operations) as the ABI documents it, the
//!   GPU's own channel stamps, and per communicator the last sequence number
//!   enqueued and completed.
//! * [`job`]: every process's operations as the rank profiles the Kineto job
//!   import aligns (communicators become groups, world ranks from `RANK` or
//!   the world communicator, NCCL's sequence numbers kept), so one event per
//!   collective instance across ranks comes out of the same matcher.
//! * [`live`]: a directory followed while the job runs: per process, per
//!   communicator, how far it got.
//! * [`evidence`]: each process's operations as a Flight Recorder dump, so
//!   `diagnose hang` reads the logs as it reads dumps.

pub mod evidence;
pub mod job;
pub mod live;
pub mod logs;
pub mod ops;

pub use job::{NcclJob, import_dir};
pub use logs::{ProcessLog, read_dir};
pub use ops::{CommProgress, Op, ProcessOps};

#[cfg(test)]
mod tests;
