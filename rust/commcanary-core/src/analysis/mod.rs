//! Per-event analyses of imported evidence (a layer of its own above
//! `import` and `trace`; nothing in the core uses it).
//!
//! * [`hang`] — who hung and where: Flight Recorder dumps, profiler traces,
//!   stacks and exception texts aligned per process group into partial
//!   collectives, mismatches, a wait-for graph and its root.

pub mod hang;
