//! The log format of `libnccl-profiler-commcanary.so`, in one place.
//!
//! The plugin (`commcanary-nccl-profiler`) writes it and the core's
//! `import::nccl_profiler` reads it; neither has its own copy of a rule.
//!
//! * [`event`]: what NCCL's profiler ABI calls event types and states
//!   (published facts: the bit of each type, the number of each state).
//! * [`record`]: one call into the plugin (start, stop or state) as a
//!   fixed-size [`record::Record`], the form the per-thread rings hold, and
//!   what each payload word means per event type.
//! * [`frame`]: the file: length- and checksum-prefixed frames (a segment
//!   header, communicators, strings, batches of records, drop counts, a seal),
//!   and the reader that skips and counts a torn tail.

pub mod event;
pub mod frame;
pub mod record;
mod varint;

pub use frame::{Frame, Header, Next, Segment, next_frame, read_segment};
pub use record::Record;
