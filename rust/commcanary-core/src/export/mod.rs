//! Exporters: a canary, or a job, in other tools' formats.
//!
//! * [`param`] — PARAM comms-replay ("basic") JSON: the reference single
//!   list, and per-rank files PARAM's replayer runs.
//! * [`timeline`] — a job's per-rank timeline as Chrome-trace JSON for
//!   Perfetto, with straggler and hang marks (uses `analysis`).

pub mod param;
pub mod timeline;
