//! Importers: other tools' traces turned into a [`crate::trace::Trace`].
//!
//! Every importer feeds [`crate::trace::TraceBuilder`] with typed events and
//! never writes `commcanary.trace.v1` text itself; the builder writes each
//! event's canonical JSON, so an imported trace compiles, verifies and
//! commits exactly like one read from a file.
//!
//! * [`kineto`] — one rank's PyTorch profiler (Kineto) Chrome trace.
//! * [`cache`] — parsed inputs on disk, keyed by their BLAKE3 fingerprint.
//! * [`stream`] — Chrome-trace `traceEvents`, one event at a time.
//! * [`stacks`] — a hung job's Python stack dumps and exception texts.
//! * [`pickle`] — a restricted, bounded reader for pickles of plain data
//!   (PyTorch Flight Recorder dumps); it never runs or imports anything.
//! * [`flight_recorder`] — PyTorch Flight Recorder dumps (pickle or JSON).

pub mod cache;
pub mod flight_recorder;
pub mod kineto;
pub mod nccl_profiler;
pub mod nccl_tools;
pub mod pickle;
pub mod stacks;
pub mod stream;
