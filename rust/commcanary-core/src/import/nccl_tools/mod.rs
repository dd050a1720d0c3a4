//! NCCL's own tools as inputs.
//!
//! * [`inspector`]: NCCL Inspector's JSON output (`inspector_output_format_version`
//!   `v4.0`): one object per collective per communicator per rank, with its
//!   execution time and bandwidths, joined into instances (the
//!   communication-performance table over them is `analysis::comm_perf`).
//! * [`nccl_tests`]: nccl-tests' JSON output, the bus bandwidth the same
//!   nodes reach per operation and size: what a job's collectives are
//!   compared against.

pub mod inspector;
pub mod nccl_tests;

use crate::error::{Error, Result};
use crate::json::{Doc, JsonLimits, Parser, Value};

/// Every top-level JSON value in `bytes`, one after another (JSON Lines, or
/// objects written one after the other), each handed to `each` with its
/// 1-based position. Blank space between values is allowed; nothing else.
///
/// # Errors
/// A syntax error or limit (naming the value's position), or what `each`
/// returns.
pub fn each_value(
    bytes: &[u8],
    mut each: impl FnMut(usize, Value<'_>) -> Result<()>,
) -> Result<()> {
    let mut parser = Parser::new(bytes, JsonLimits::default())?;
    let mut doc = Doc::new();
    let mut n = 0;
    loop {
        parser.skip_ws();
        if parser.pos() >= bytes.len() {
            return Ok(());
        }
        n += 1;
        doc.clear();
        let root = parser
            .parse_value(&mut doc, 1)
            .map_err(|e| Error::new(e.kind(), format!("record {n}: {}", e.message())))?;
        each(n, doc.value(root))?;
    }
}
