//! `libnccl-profiler-commcanary.so`: an NCCL profiler plugin.
//!
//! NCCL loads it (`NCCL_PROFILER_PLUGIN=commcanary`, or the library's path)
//! and calls the newest table it knows: `ncclProfiler_v6`, `_v5` or `_v4`.
//! Each calling thread writes its events into its own bounded lock-free ring;
//! one writer thread drains every ring into segmented log files in
//! `COMMCANARY_NCCL_DIR`, in the format of `commcanary-nccl-log`, which
//! `commcanary import-nccl-profiler` reads.
//!
//! * [`abi`]: the ABI's layouts.
//! * [`exports`]: the tables and the functions NCCL calls (the hot path).
//! * [`ring`], [`threads`]: per-thread rings and their registration.
//! * [`writer`]: the writer thread and segments.
//! * [`clock`]: stamps (TSC ticks where invariant) and their wall-clock fit.
//! * [`config`]: environment settings.
//! * [`tsan`]: happens-before notes for a ThreadSanitizer host.
//! * [`layout`]: offsets and sizes, exported for the C harness's check.

#![allow(unsafe_code)]
// The ABI's field names are documented where they are declared.
#![allow(missing_docs)]

pub mod abi;
pub mod clock;
pub mod config;
pub mod exports;
pub mod layout;
pub mod ring;
pub mod threads;
pub mod tsan;
pub mod writer;
