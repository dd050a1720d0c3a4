//! The rules a configuration list must satisfy, checked in one place for
//! every front end: between [`MIN_CONFIGURATIONS`] and [`MAX_CONFIGURATIONS`]
//! entries, unique non-empty names, and settings each within range.

use super::Configuration;
use crate::error::{Error, Result};
use crate::sim::{RequestedSettings, Settings};

/// Fewest configurations a ranking needs.
pub const MIN_CONFIGURATIONS: usize = 2;
/// Most configurations a check replays.
pub const MAX_CONFIGURATIONS: usize = 32;

/// Builds configurations from caller-supplied `(name, settings)` pairs.
///
/// # Errors
/// A list of the wrong length, an empty or repeated name, or settings out of
/// range (`configuration "x": bandwidth_gbps must be positive`).
pub fn checked_configurations(list: &[(String, RequestedSettings)]) -> Result<Vec<Configuration>> {
    if !(MIN_CONFIGURATIONS..=MAX_CONFIGURATIONS).contains(&list.len()) {
        return Err(Error::invalid(format!(
            "configurations must have between {MIN_CONFIGURATIONS} and {MAX_CONFIGURATIONS} entries, got {}",
            list.len()
        )));
    }
    let mut out: Vec<Configuration> = Vec::with_capacity(list.len());
    for (name, requested) in list {
        if name.is_empty() || out.iter().any(|c| &c.name == name) {
            return Err(Error::invalid(format!(
                "configuration names must be non-empty and unique: {name:?}"
            )));
        }
        let settings = Settings::checked(requested)
            .map_err(|e| Error::invalid(format!("configuration {name:?}: {}", e.message())))?;
        out.push(Configuration {
            name: name.clone(),
            settings,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> (String, RequestedSettings) {
        (name.to_owned(), RequestedSettings::default())
    }

    #[test]
    fn the_rules_hold() {
        assert!(checked_configurations(&[named("a")]).is_err());
        assert!(checked_configurations(&[named("a"), named("a")]).is_err());
        assert!(checked_configurations(&[named("a"), named("")]).is_err());
        let ok = checked_configurations(&[named("a"), named("b")]).unwrap();
        assert_eq!(ok[1].settings, Settings::default());
        let mut bad = named("c");
        bad.1.bandwidth_gbps = Some(0.0);
        let e = checked_configurations(&[named("a"), bad]).unwrap_err();
        assert_eq!(
            e.message(),
            "configuration \"c\": bandwidth_gbps must be positive"
        );
    }
}
