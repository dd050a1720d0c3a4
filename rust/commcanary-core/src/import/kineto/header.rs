//! The header of a Kineto file: `distributedInfo` (rank, world size,
//! backend, the groups this rank belongs to) and `baseTimeNanoseconds`.
//!
//! A group's `ranks` must be distinct non-negative integers and agree with
//! its `pg_size`; anything else is refused rather than repaired.

use super::profile::GroupDecl;
use super::scan::Header;
use super::single::integer;
use crate::error::{Error, Result};
use crate::json::{JsonLimits, Value, parse};

/// Reads the header facts from the top-level members `(key, JSON text)`.
///
/// # Errors
/// Invalid member JSON, or a `pg_config` entry that is not usable.
pub(super) fn read(members: &[(String, Vec<u8>)]) -> Result<Header> {
    let mut header = Header::default();
    for (key, text) in members {
        match key.as_str() {
            "baseTimeNanoseconds" => {
                let doc = parse(text, JsonLimits::default())?;
                header.base_time_ns = doc
                    .root()
                    .and_then(|v| integer(Some(v)))
                    .filter(|&n| n >= 0)
                    .ok_or_else(|| {
                        Error::invalid("field 'baseTimeNanoseconds' must be a non-negative integer")
                    })?;
            }
            "distributedInfo" => {
                let doc = parse(text, JsonLimits::default())?;
                if let Some(info) = doc.root().filter(Value::is_object) {
                    distributed_info(info, &mut header)?;
                }
            }
            _ => {}
        }
    }
    Ok(header)
}

fn distributed_info(info: Value<'_>, header: &mut Header) -> Result<()> {
    let int = |k: &str| integer(info.get(k));
    header.rank = int("rank");
    if header.rank.is_some_and(|r| r < 0) {
        return Err(Error::invalid(
            "field 'distributedInfo.rank' must be non-negative",
        ));
    }
    header.world_size = int("world_size");
    if header
        .world_size
        .is_some_and(|w| !(1..=65_536).contains(&w))
    {
        return Err(Error::invalid(
            "field 'distributedInfo.world_size' must be between 1 and 65536",
        ));
    }
    header.backend = info
        .get("backend")
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    let Some(config) = info.get("pg_config") else {
        return Ok(());
    };
    let entries: Vec<Value<'_>> = if config.is_array() {
        config.elements().collect()
    } else if config.is_object() {
        config.members().map(|(_, v)| v).collect()
    } else {
        return Err(Error::invalid(
            "field 'distributedInfo.pg_config' must be a list",
        ));
    };
    for entry in entries {
        header.groups.push(group(entry)?);
    }
    Ok(())
}

fn group(entry: Value<'_>) -> Result<GroupDecl> {
    let text = |k: &str| -> Option<String> {
        let v = entry.get(k)?;
        v.as_str()
            .map(str::to_owned)
            .or_else(|| v.as_i64().map(|n| n.to_string()))
    };
    let name = text("pg_name")
        .ok_or_else(|| Error::invalid("field 'distributedInfo.pg_config[].pg_name' is missing"))?;
    let desc = text("pg_desc").or_else(|| text("uid")).unwrap_or_default();
    let bad = |why: &str| {
        Error::invalid(format!(
            "field 'distributedInfo.pg_config' group '{name}' {why}"
        ))
    };
    let ranks_value = entry.get("ranks").ok_or_else(|| bad("has no ranks"))?;
    let mut ranks = Vec::new();
    if ranks_value.is_array() {
        if ranks_value.len().unwrap_or(0) > 65_536 {
            return Err(bad("lists more than 65536 ranks"));
        }
        for r in ranks_value.elements() {
            ranks.push(
                r.as_i64()
                    .filter(|&r| r >= 0)
                    .ok_or_else(|| bad("has a rank that is not a non-negative integer"))?,
            );
        }
    } else {
        return Err(bad("has ranks that are not a list"));
    }
    let mut sorted = ranks.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != ranks.len() || ranks.is_empty() {
        return Err(bad("lists an empty or repeated rank"));
    }
    if let Some(size) = integer(entry.get("pg_size"))
        && size != ranks.len() as i64
    {
        return Err(bad(&format!(
            "lists {} ranks but its pg_size is {size}",
            ranks.len()
        )));
    }
    Ok(GroupDecl { name, desc, ranks })
}
