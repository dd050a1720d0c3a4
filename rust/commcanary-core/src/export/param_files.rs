//! Writes a PARAM export to disk: the reference single list at one path
//! and/or PARAM's per-rank `<rank>.json` files in a directory. Everything is
//! computed, and every target checked, before the first byte is written, so
//! a refusal leaves nothing behind.

use std::path::Path;

use super::param::{ParamExport, ParamOptions, export_basic, export_per_rank};
use crate::canary::Program;
use crate::error::{Error, ErrorKind, Result};
use crate::output::{check_target, write_atomic_parts};

/// An export ready to write: the single list and the per-rank files, each
/// when asked for.
pub struct Prepared {
    /// The reference single list.
    pub basic: Option<ParamExport>,
    /// The per-rank files.
    pub per_rank: Option<ParamExport>,
}

/// At least one target must be asked for.
///
/// # Errors
/// Neither given, an option error naming `output`.
pub fn require_target(output: Option<&Path>, per_rank_dir: Option<&Path>) -> Result<()> {
    if output.is_none() && per_rank_dir.is_none() {
        return Err(Error::option("output", "or per_rank_dir is required"));
    }
    Ok(())
}

/// Exports `program` for the targets asked for (nothing is written yet).
///
/// # Errors
/// Neither target given (an option error), or an export the program cannot
/// make.
pub fn prepare_param(
    program: &Program,
    options: &ParamOptions,
    output: Option<&Path>,
    per_rank_dir: Option<&Path>,
) -> Result<Prepared> {
    require_target(output, per_rank_dir)?;
    Ok(Prepared {
        basic: output.map(|_| export_basic(program, options)).transpose()?,
        per_rank: per_rank_dir
            .map(|_| export_per_rank(program, options))
            .transpose()?,
    })
}

impl Prepared {
    /// Writes the export: every target checked first, then the per-rank
    /// files, then the single list.
    ///
    /// # Errors
    /// A target that is not writable (an output error).
    pub fn write(&self, output: Option<&Path>, per_rank_dir: Option<&Path>) -> Result<()> {
        if let Some(dir) = per_rank_dir
            && dir.exists()
            && !dir.is_dir()
        {
            return Err(Error::new(
                ErrorKind::Output,
                format!("{} is not a directory", dir.display()),
            ));
        }
        if let Some(out) = output {
            check_target(out)?;
        }
        if let (Some(dir), Some(p)) = (per_rank_dir, &self.per_rank) {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::new(
                    ErrorKind::Output,
                    format!("cannot create {}: {e}", dir.display()),
                )
            })?;
            for (rank, text, _) in &p.files {
                write_atomic_parts(&dir.join(format!("{rank}.json")), &[text, b"\n"])?;
            }
        }
        if let (Some(out), Some(b)) = (output, &self.basic) {
            write_atomic_parts(out, &[&b.files[0].1, b"\n"])?;
        }
        Ok(())
    }
}
