//! Per-event analyses of imported evidence (a layer of its own above
//! `import` and `trace`; nothing in the core uses it).
//!
//! * [`hang`] — who hung and where: Flight Recorder dumps, profiler traces,
//!   stacks and exception texts aligned per process group into partial
//!   collectives, mismatches, a wait-for graph and its root.
//! * [`stragglers`] — who is slow and what it costs: arrival lags per
//!   collective instance, late arrivals and slow collectives against the
//!   job's own noise, each costed by a what-if replay of its step.

pub mod hang;
pub mod stragglers;
