//! Exporters: a canary, or a job, in other tools' formats.
//!
//! * [`param`] — PARAM comms-replay ("basic") JSON: the reference single
//!   list, and per-rank files PARAM's replayer runs; [`param_files`] writes
//!   them, every target checked before the first byte.
//! * [`timeline`] — a job's per-rank timeline as Chrome-trace JSON for
//!   Perfetto, with straggler and hang marks (uses `analysis`).
//! * [`columns`] — a document's table (its rows) as typed columns.

pub mod columns;
pub mod param;
pub mod param_files;
pub mod timeline;
