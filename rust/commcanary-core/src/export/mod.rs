//! Exporters: a canary in other tools' formats.
//!
//! * [`param`] — PARAM comms-replay ("basic") JSON: the reference single
//!   list, and per-rank files PARAM's replayer runs.

pub mod param;
