//! Atomic artifact files.
//!
//! [`write_atomic`] writes to a temporary file in the target's directory,
//! flushes and fsyncs it, renames it over the target and fsyncs the
//! directory, so readers never see a partial artifact and a failure leaves
//! nothing behind. The target's directory must already exist; a symlink or a
//! directory at the target is refused.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};

fn output_error(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Output,
        format!("cannot write {}: {what}", path.display()),
    )
}

/// Checks that `path` can receive an artifact.
///
/// # Errors
/// [`ErrorKind::Output`] when the directory is missing or the target is a
/// symlink or a directory.
pub fn check_target(path: &Path) -> Result<PathBuf> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() {
        return Err(output_error(
            path,
            format_args!("directory {} does not exist", parent.display()),
        ));
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if meta.file_type().is_symlink() {
            return Err(output_error(path, "final path is a symlink"));
        }
        if meta.is_dir() {
            return Err(output_error(path, "it is a directory"));
        }
    }
    Ok(parent)
}

/// Writes `data` to `path` atomically.
///
/// # Errors
/// [`ErrorKind::Output`] on any check or I/O failure; the target is then
/// untouched and no temporary file remains.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    write_atomic_parts(path, &[data])
}

/// Writes the concatenation of `parts` to `path` atomically, without joining
/// them in memory first.
///
/// # Errors
/// As [`write_atomic`].
pub fn write_atomic_parts(path: &Path, parts: &[&[u8]]) -> Result<()> {
    let parent = check_target(path)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let injected = crate::fault::write_error();
    if let Some((true, e)) = injected {
        return Err(output_error(path, e));
    }
    let mut attempt = 0u32;
    let (tmp, mut file) = loop {
        let candidate = parent.join(format!(".{name}.{}.{attempt}.tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&candidate)
        {
            Ok(f) => break (candidate, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 1000 => {
                attempt += 1
            }
            Err(e) => return Err(output_error(path, e)),
        }
    };
    let result = parts
        .iter()
        .try_for_each(|part| match &injected {
            Some((false, _)) => file
                .write_all(&part[..part.len() / 2])
                .and_then(|()| Err(std::io::Error::from_raw_os_error(28))),
            _ => file.write_all(part),
        })
        .and_then(|()| file.flush())
        .and_then(|()| file.sync_all())
        .and_then(|()| {
            drop(file);
            std::fs::rename(&tmp, path)
        });
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(output_error(path, e));
    }
    if let Ok(dir) = std::fs::File::open(&parent) {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_refuses() {
        let dir = std::env::temp_dir().join(format!("commcanary-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("a.json");
        write_atomic(&target, b"{}").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"{}");
        assert!(write_atomic(&dir.join("missing/a.json"), b"{}").is_err());
        assert!(write_atomic(&dir, b"{}").is_err());
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(leftovers.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
