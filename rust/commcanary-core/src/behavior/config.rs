//! The rules a configuration list must satisfy, checked in one place for
//! every front end: between [`MIN_CONFIGURATIONS`] and [`MAX_CONFIGURATIONS`]
//! entries, objects with unique non-empty names and known keys, and values
//! each of the right kind and within range. Two lists follow them: the
//! model's configurations a behaviour check replays
//! ([`read_configurations`]), and the physical runs `validate-model` makes
//! ([`read_physical_configurations`]).

use super::Configuration;
use crate::error::{Error, Result};
use crate::json::{Json, JsonLimits, Node, Value, parse};
use crate::sim::{MAX_REPLAY_EVENTS_LIMIT, SettingValue, Settings};

/// Fewest configurations a ranking needs.
pub const MIN_CONFIGURATIONS: usize = 2;
/// Most configurations a check replays.
pub const MAX_CONFIGURATIONS: usize = 32;

/// The settings a behaviour configuration may set beside its `name`: four
/// backend numbers (sorted), then three run integers (sorted).
pub const CONFIGURATION_SETTINGS: [&str; 7] = [
    "bandwidth_gbps",
    "compute_pressure",
    "latency_floor_us",
    "overlap_efficiency",
    "iterations",
    "max_replay_events",
    "seed",
];

/// Where the integers of [`CONFIGURATION_SETTINGS`] begin.
const INTEGRAL_FROM: usize = 4;

fn invalid(message: String) -> Error {
    Error::invalid(message)
}

/// The list's entries, each an object with a unique non-empty `name` and
/// only `allowed` keys (the allowed ones named as `allowed_text` says).
fn entries<'a>(
    list: Value<'a>,
    place: &str,
    allowed: &[&str],
    unknown_hint: &dyn Fn() -> String,
) -> Result<Vec<(String, Value<'a>)>> {
    let n = list.len().unwrap_or(0);
    if !list.is_array() || !(MIN_CONFIGURATIONS..=MAX_CONFIGURATIONS).contains(&n) {
        return Err(invalid(format!(
            "{place} must have between {MIN_CONFIGURATIONS} and {MAX_CONFIGURATIONS} entries, got {n}"
        )));
    }
    let mut out: Vec<(String, Value<'a>)> = Vec::with_capacity(n);
    for (i, item) in list.elements().enumerate() {
        let at = format!("{place}[{i}]");
        if !item.is_object() {
            return Err(invalid(format!("{at} must be an object")));
        }
        for (key, _) in item.members() {
            let key = String::from_utf8_lossy(key);
            if key != "name" && !allowed.contains(&key.as_ref()) {
                return Err(invalid(format!(
                    "{at} has unknown key '{key}' ({})",
                    unknown_hint()
                )));
            }
        }
        let name = item.get("name").and_then(|v| v.as_str()).unwrap_or("");
        if name.is_empty() {
            return Err(invalid(format!(
                "{at} field 'name' must be a non-empty string"
            )));
        }
        if out.iter().any(|(seen, _)| seen == name) {
            return Err(invalid(format!("{at} field 'name' repeats '{name}'")));
        }
        out.push((name.to_owned(), item));
    }
    Ok(out)
}

fn parse_list(bytes: &[u8], place: &str) -> Result<crate::json::Doc> {
    parse(bytes, JsonLimits::default()).map_err(|e| invalid(format!("{place} {}", e.message())))
}

/// One behaviour configuration's settings, from its members.
fn configuration(name: &str, item: Value<'_>, at: &str) -> Result<(Configuration, Json)> {
    let mut settings = Settings::default();
    let mut resolved = Json::object().with("name", Json::Str(name.to_owned()));
    for (k, key) in CONFIGURATION_SETTINGS.iter().enumerate() {
        let integral = k >= INTEGRAL_FROM;
        let value = item.get(key);
        let field = |rule: &str| invalid(format!("{at} field '{key}' {rule}"));
        if integral {
            let v = match value {
                None => match *key {
                    "iterations" => i64::from(settings.iterations),
                    "max_replay_events" => settings.max_replay_events as i64,
                    _ => settings.seed,
                },
                Some(v) => match v.node() {
                    Node::Int(i) => i,
                    _ => return Err(field("must be an integer")),
                },
            };
            let ceiling = MAX_REPLAY_EVENTS_LIMIT as i64;
            match *key {
                "seed" => settings.seed = v,
                _ if !(1..=ceiling).contains(&v) => {
                    return Err(field(&format!("must be between 1 and {ceiling}")));
                }
                "iterations" => settings.iterations = v as u32,
                _ => settings.max_replay_events = v as u64,
            }
            resolved.set(key, Json::Int(v));
        } else {
            let setting = crate::sim::settings::backend_setting(key).expect("a backend setting");
            let v = match value.map(|v| v.node()) {
                None => match setting.default_value() {
                    SettingValue::Number(x) => x,
                    _ => unreachable!("configuration settings are numbers"),
                },
                Some(Node::Int(i)) => i as f64,
                Some(Node::Float { value, .. }) => value,
                Some(_) => return Err(field("must be a number")),
            };
            (setting.set)(&mut settings, SettingValue::Number(v));
            if !(setting.check)(&settings) {
                return Err(field(setting.rule));
            }
            resolved.set(key, Json::Float(v));
        }
    }
    let configuration = Configuration {
        name: name.to_owned(),
        settings,
    };
    Ok((configuration, resolved))
}

/// Reads a behaviour configuration list (JSON, `place` naming it in
/// errors): the configurations, and the list with every default filled in
/// (canonical JSON, what a behaviour report records).
///
/// # Errors
/// A list of the wrong length, an entry that is not an object, an unknown
/// key, an empty or repeated name, or a value of the wrong kind or out of
/// range: `configurations[1] field 'bandwidth_gbps' must be positive`.
pub fn read_configurations(bytes: &[u8], place: &str) -> Result<(Vec<Configuration>, Vec<u8>)> {
    let doc = parse_list(bytes, place)?;
    configurations_of(doc.root().expect("a parsed document"), place)
}

/// Reads a configuration file (`where` names it): a JSON list, or an object
/// whose only member is `configurations`, a list; the list as
/// [`read_configurations`] reads it.
///
/// # Errors
/// Not JSON, another shape, or a broken list rule, each naming the file.
pub fn read_configuration_file(bytes: &[u8], place: &str) -> Result<(Vec<Configuration>, Vec<u8>)> {
    let doc = parse_list(bytes, place)?;
    let mut root = doc.root().expect("a parsed document");
    if root.is_object() {
        if let Some((key, _)) = root.members().find(|(k, _)| *k != b"configurations") {
            return Err(invalid(format!(
                "{place} has unknown key '{}' (expected 'configurations')",
                String::from_utf8_lossy(key)
            )));
        }
        root = root
            .get("configurations")
            .filter(Value::is_array)
            .ok_or_else(|| invalid(format!("{place} field 'configurations' must be a list")))?;
    } else if !root.is_array() {
        return Err(invalid(format!(
            "{place} field 'configurations' must be a list"
        )));
    }
    configurations_of(root, &format!("{place} configurations"))
}

fn configurations_of(root: Value<'_>, place: &str) -> Result<(Vec<Configuration>, Vec<u8>)> {
    let hint = || {
        let mut keys: Vec<&str> = CONFIGURATION_SETTINGS.to_vec();
        keys.push("name");
        keys.sort_unstable();
        format!("allowed: {}", keys.join(", "))
    };
    let mut configurations = Vec::new();
    let mut resolved = Vec::new();
    for (i, (name, item)) in entries(root, place, &CONFIGURATION_SETTINGS, &hint)?
        .into_iter()
        .enumerate()
    {
        let (c, json) = configuration(&name, item, &format!("{place}[{i}]"))?;
        configurations.push(c);
        resolved.push(json);
    }
    Ok((configurations, Json::Array(resolved).to_canonical()))
}

/// The default configurations as a list of the settings each changes
/// (canonical JSON; [`super::default_configurations`] is the source).
#[must_use]
pub fn default_configurations_json() -> Vec<u8> {
    let base = Settings::default();
    let list = super::default_configurations().into_iter().map(|c| {
        let mut o = Json::object().with("name", Json::Str(c.name));
        for key in &CONFIGURATION_SETTINGS[..INTEGRAL_FROM] {
            let setting = crate::sim::settings::backend_setting(key).expect("a backend setting");
            if let SettingValue::Number(x) = (setting.get)(&c.settings) {
                if (setting.get)(&base) != SettingValue::Number(x) {
                    o.set(key, Json::Float(x));
                }
            }
        }
        o
    });
    Json::Array(list.collect()).to_canonical()
}

/// The members a physical configuration may have beside its `name`.
pub const PHYSICAL_SETTINGS: [&str; 4] = [
    "bytes_scale",
    "compute_fill",
    "compute_fill_scale",
    "concurrent_groups",
];

/// Reads the physical configurations `validate-model` runs (JSON, `place`
/// naming it): `{name, bytes_scale, compute_fill_scale, compute_fill,
/// concurrent_groups}`, scales positive and at most 1e6 (default 1), fill
/// `sleep` or `spin` (default `sleep`), groups `on` or `off` (default
/// `on`). Returns the list with every default filled in (canonical JSON).
///
/// # Errors
/// As [`read_configurations`], with these members' rules.
pub fn read_physical_configurations(bytes: &[u8], place: &str) -> Result<Vec<u8>> {
    let doc = parse_list(bytes, place)?;
    let root = doc.root().expect("a parsed document");
    if !root.is_array() {
        return Err(invalid(format!(
            "{place} must be a JSON list of configurations"
        )));
    }
    let hint = || {
        let mut keys: Vec<&str> = PHYSICAL_SETTINGS.to_vec();
        keys.push("name");
        keys.sort_unstable();
        format!("a physical run realises {}", keys.join(", "))
    };
    let mut out = Vec::new();
    for (i, (name, item)) in entries(root, place, &PHYSICAL_SETTINGS, &hint)?
        .into_iter()
        .enumerate()
    {
        let at = format!("{place}[{i}]");
        let mut o = Json::object().with("name", Json::Str(name));
        for key in ["bytes_scale", "compute_fill_scale"] {
            let v = match item.get(key).map(|v| v.node()) {
                None => 1.0,
                Some(Node::Int(i)) => i as f64,
                Some(Node::Float { value, .. }) => value,
                Some(_) => f64::NAN,
            };
            if !(v > 0.0 && v <= 1e6) {
                return Err(invalid(format!(
                    "{at} field '{key}' must be a positive number"
                )));
            }
            o.set(key, Json::Float(v));
        }
        for (key, choices) in [
            ("compute_fill", ["sleep", "spin"]),
            ("concurrent_groups", ["on", "off"]),
        ] {
            let v = match item.get(key) {
                None => Some(choices[0]),
                Some(v) => v
                    .as_str()
                    .and_then(|s| choices.iter().copied().find(|c| *c == s)),
            };
            let v = v.ok_or_else(|| {
                invalid(format!(
                    "{at} field '{key}' must be '{}' or '{}'",
                    choices[0], choices[1]
                ))
            })?;
            o.set(key, Json::Str(v.to_owned()));
        }
        out.push(o);
    }
    Ok(Json::Array(out).to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<Vec<Configuration>> {
        read_configurations(json.as_bytes(), "configurations").map(|(c, _)| c)
    }

    #[test]
    fn the_rules_hold() {
        assert!(read(r#"[{"name":"a"}]"#).is_err());
        let e = read(r#"[{"name":"a"},{"name":"a"}]"#).unwrap_err();
        assert_eq!(e.message(), "configurations[1] field 'name' repeats 'a'");
        assert!(read(r#"[{"name":"a"},{"name":""}]"#).is_err());
        let ok = read(r#"[{"name":"a"},{"name":"b"}]"#).unwrap();
        assert_eq!(ok[1].settings, Settings::default());
        let e = read(r#"[{"name":"a"},{"name":"c","bandwidth_gbps":0}]"#).unwrap_err();
        assert_eq!(
            e.message(),
            "configurations[1] field 'bandwidth_gbps' must be positive"
        );
        let e = read(r#"[{"name":"a"},{"name":"c","iterations":1.5}]"#).unwrap_err();
        assert!(e.message().ends_with("must be an integer"));
        let e = read(r#"[{"name":"a"},{"name":"c","colour":1}]"#).unwrap_err();
        assert!(e.message().contains("unknown key 'colour' (allowed: "));
    }

    #[test]
    fn a_file_holds_a_list_or_an_object_of_one() {
        let list = br#"[{"name":"a"},{"name":"b"}]"#;
        assert_eq!(read_configuration_file(list, "f").unwrap().0.len(), 2);
        let wrapped = br#"{"configurations":[{"name":"a"},{"name":"b"}]}"#;
        assert_eq!(read_configuration_file(wrapped, "f").unwrap().0.len(), 2);
        let e = read_configuration_file(br#"{"configurations":[],"x":1}"#, "f").unwrap_err();
        assert_eq!(
            e.message(),
            "f has unknown key 'x' (expected 'configurations')"
        );
        let e = read_configuration_file(b"3", "f").unwrap_err();
        assert_eq!(e.message(), "f field 'configurations' must be a list");
        let e = read_configuration_file(br#"[{"name":"a"}]"#, "f").unwrap_err();
        assert!(
            e.message()
                .starts_with("f configurations must have between 2")
        );
    }

    #[test]
    fn defaults_are_filled_in_and_the_default_list_reads_back() {
        let (configs, json) = read_configurations(&default_configurations_json(), "d").unwrap();
        assert_eq!(configs, super::super::default_configurations());
        let text = String::from_utf8(json).unwrap();
        assert!(
            text.starts_with(r#"[{"bandwidth_gbps":55.0,"compute_pressure":0.55,"iterations":1,"#)
        );
    }

    #[test]
    fn physical_configurations_take_their_defaults() {
        let json =
            read_physical_configurations(br#"[{"name":"a"},{"name":"b","bytes_scale":2}]"#, "c")
                .unwrap();
        assert_eq!(
            String::from_utf8(json).unwrap(),
            r#"[{"bytes_scale":1.0,"compute_fill":"sleep","compute_fill_scale":1.0,"concurrent_groups":"on","name":"a"},{"bytes_scale":2.0,"compute_fill":"sleep","compute_fill_scale":1.0,"concurrent_groups":"on","name":"b"}]"#
        );
        let e =
            read_physical_configurations(br#"[{"name":"a"},{"name":"b","compute_fill":"x"}]"#, "c")
                .unwrap_err();
        assert_eq!(
            e.message(),
            "c[1] field 'compute_fill' must be 'sleep' or 'spin'"
        );
    }
}
