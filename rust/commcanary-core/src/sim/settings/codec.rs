//! Settings ⇄ JSON, driven by the one settings table
//! ([`super::BACKEND_SETTINGS`]): a caller's request, a report's `backend`
//! section, and the backend file (`commcanary.backend.v1`) that
//! `commcanary calibrate` writes and `--backend-file` reads.
//!
//! Invariants: every reader checks shapes here and ranges through
//! [`Settings::validate`]; every writer emits canonical JSON with the
//! settings in the table's (sorted) order, so the same settings give the
//! same bytes whichever front end asked.

use super::{
    ABLATION_NAMES, Ablations, BACKEND_SETTINGS, BackendSetting, FileRole, MAX_OP_OVERRIDES,
    MAX_REPLAY_EVENTS_LIMIT, OpOverride, SettingValue, Settings,
};
use crate::document::BACKEND;
use crate::error::{Error, Result};
use crate::json::{Json, JsonLimits, Node, Value, parse};

/// The shape a setting's value has in JSON, as an error states it.
fn shape(setting: &BackendSetting) -> &'static str {
    match setting.default_value() {
        SettingValue::Text(_) => "a non-empty string",
        SettingValue::Number(_) => "a number",
        SettingValue::Flag(_) => "a boolean",
        SettingValue::Names(_) => "a list of op names",
        SettingValue::Overrides(_) => "a list of {op, latency_floor_us, bandwidth_gbps}",
    }
}

fn number(v: Value<'_>) -> Option<f64> {
    match v.node() {
        Node::Int(i) => Some(i as f64),
        Node::Float { value, .. } => Some(value),
        _ => None,
    }
}

/// One override: `{op, latency_floor_us, bandwidth_gbps}`, or (`arrays`)
/// `[op, latency_floor_us, bandwidth_gbps]` as the Python API holds it.
fn override_of(v: Value<'_>, arrays: bool) -> Option<OpOverride> {
    let (op, floor, bandwidth) = if v.is_object() {
        if v.len() != Some(3) {
            return None;
        }
        (
            v.get("op")?,
            v.get("latency_floor_us")?,
            v.get("bandwidth_gbps")?,
        )
    } else if arrays && v.is_array() && v.len() == Some(3) {
        (v.element(0)?, v.element(1)?, v.element(2)?)
    } else {
        return None;
    };
    Some(OpOverride {
        op: op.as_str()?.to_owned(),
        latency_floor_us: number(floor)?,
        bandwidth_gbps: number(bandwidth)?,
    })
}

/// A setting's value read from JSON, in the shape its default has; `None`
/// for the wrong shape. `lenient` (a request) reads `null` as NaN for a
/// number, which its rule then refuses (a non-finite float serialises as
/// `null`), and accepts overrides as arrays.
fn read_value(setting: &BackendSetting, v: Value<'_>, lenient: bool) -> Option<SettingValue> {
    let list_of = |v: Value<'_>| v.is_array() && v.len().is_some_and(|n| n <= MAX_OP_OVERRIDES);
    Some(match setting.default_value() {
        SettingValue::Text(_) => SettingValue::Text(v.as_str()?.to_owned()),
        SettingValue::Number(_) if lenient && v.is_null() => SettingValue::Number(f64::NAN),
        SettingValue::Number(_) => SettingValue::Number(number(v)?),
        SettingValue::Flag(_) => SettingValue::Flag(v.as_bool()?),
        SettingValue::Names(_) if list_of(v) => SettingValue::Names(
            v.elements()
                .map(|e| e.as_str().map(str::to_owned))
                .collect::<Option<_>>()?,
        ),
        SettingValue::Overrides(_) if list_of(v) => SettingValue::Overrides(
            v.elements()
                .map(|e| override_of(e, lenient))
                .collect::<Option<_>>()?,
        ),
        SettingValue::Names(_) | SettingValue::Overrides(_) => return None,
    })
}

fn to_json(v: SettingValue) -> Json {
    match v {
        SettingValue::Text(s) => Json::Str(s),
        SettingValue::Number(x) => Json::Float(x),
        SettingValue::Flag(b) => Json::Bool(b),
        SettingValue::Names(names) => Json::Array(names.into_iter().map(Json::Str).collect()),
        SettingValue::Overrides(list) => Json::Array(
            list.into_iter()
                .map(|o| {
                    Json::object()
                        .with("bandwidth_gbps", Json::Float(o.bandwidth_gbps))
                        .with("latency_floor_us", Json::Float(o.latency_floor_us))
                        .with("op", Json::Str(o.op))
                })
                .collect(),
        ),
    }
}

fn parse_object(bytes: &[u8]) -> Result<crate::json::Doc> {
    let doc = parse(bytes, JsonLimits::default())?;
    if !doc.root().is_some_and(|r| r.is_object()) {
        return Err(Error::invalid("must be a JSON object"));
    }
    Ok(doc)
}

/// The run settings a request may carry besides the backend's.
pub const RUN_SETTINGS: [&str; 4] = ["ablations", "iterations", "max_replay_events", "seed"];

/// Settings from a caller's request: a JSON object holding any backend
/// setting and the run's `iterations`, `seed`, `max_replay_events` and
/// `ablations`; an absent member (or a `null` run setting) takes its
/// default. The default label (absent, `null` or given as the default) is
/// named after the canary's job when it is replayed
/// ([`Settings::label_for`]). Overrides may be `[op, latency_floor_us,
/// bandwidth_gbps]`.
///
/// # Errors
/// An [`Error::option`] naming the first unknown member, value of the wrong
/// shape, or value out of range.
pub fn settings_from_request(bytes: &[u8]) -> Result<Settings> {
    let doc = parse_object(bytes)?;
    let root = doc.root().expect("an object");
    let mut s = Settings::default();
    for (key, v) in root.members() {
        let key = std::str::from_utf8(key).unwrap_or("");
        if key == "label" && v.is_null() {
            continue;
        }
        if let Some(setting) = super::backend_setting(key) {
            let ok = read_value(setting, v, true).is_some_and(|value| (setting.set)(&mut s, value));
            if !ok {
                return Err(Error::option(
                    setting.option(),
                    format!("must be {}", shape(setting)),
                ));
            }
        } else if !v.is_null() {
            read_run_setting(&mut s, key, v)?;
        }
    }
    // The default label names the model's default backend; a replay names a
    // job that ran on another backend after it instead.
    s.label_from_canary = s.label == Settings::default().label;
    s.validate()?;
    Ok(s)
}

fn read_run_setting(s: &mut Settings, key: &str, v: Value<'_>) -> Result<()> {
    let between = format!("must be between 1 and {MAX_REPLAY_EVENTS_LIMIT}");
    match key {
        "iterations" => {
            s.iterations = v
                .as_i64()
                .and_then(|i| u32::try_from(i).ok())
                .filter(|&i| i >= 1)
                .ok_or_else(|| Error::option("iterations", "must be at least 1"))?;
        }
        "seed" => {
            s.seed = v
                .as_i64()
                .ok_or_else(|| Error::option("seed", "must be a 64-bit integer"))?;
        }
        "max_replay_events" => {
            s.max_replay_events = v
                .as_i64()
                .and_then(|i| u64::try_from(i).ok())
                .ok_or_else(|| Error::option("max_replay_events", between))?;
        }
        "ablations" => {
            let names: Option<Vec<&str>> = v
                .is_array()
                .then(|| v.elements().map(|e| e.as_str()).collect())
                .flatten();
            let expected = format!("expected one of {}", ABLATION_NAMES.join(", "));
            let names = names.ok_or_else(|| {
                Error::option("ablations", format!("must be a list of names; {expected}"))
            })?;
            s.ablations = Ablations::parse(names)
                .map_err(|e| Error::option("ablations", format!("has {e}; {expected}")))?;
        }
        other => {
            let known: Vec<&str> = BACKEND_SETTINGS.iter().map(|b| b.name).collect();
            return Err(Error::invalid(format!(
                "unknown replay setting '{other}' (known: {}, {})",
                known.join(", "),
                RUN_SETTINGS.join(", ")
            )));
        }
    }
    Ok(())
}

/// The settings as a request would give them: every backend setting and
/// the run's, canonical JSON (what [`settings_from_request`] reads back),
/// overrides as `[op, latency_floor_us, bandwidth_gbps]` (the Python API's
/// form).
#[must_use]
pub fn request_json(s: &Settings) -> Vec<u8> {
    let mut o = Json::object();
    for setting in BACKEND_SETTINGS {
        let value = match (setting.get)(s) {
            SettingValue::Overrides(list) => Json::Array(
                list.into_iter()
                    .map(|o| {
                        Json::Array(vec![
                            Json::Str(o.op),
                            Json::Float(o.latency_floor_us),
                            Json::Float(o.bandwidth_gbps),
                        ])
                    })
                    .collect(),
            ),
            other => to_json(other),
        };
        o.set(setting.name, value);
    }
    let ablations = s
        .ablations
        .names()
        .into_iter()
        .map(|n| Json::Str(n.to_owned()));
    o.set("ablations", Json::Array(ablations.collect()));
    o.set("iterations", Json::Int(i64::from(s.iterations)));
    o.set("max_replay_events", Json::Int(s.max_replay_events as i64));
    o.set("seed", Json::Int(s.seed));
    o.to_canonical()
}

/// The canonical `backend` section of a report: the required settings,
/// every other one the settings change from its default, the bandwidth
/// unit and the mode.
#[must_use]
pub fn backend_json(s: &Settings) -> Vec<u8> {
    let mut o = Json::object()
        .with("bandwidth_unit", Json::Str("Gbit/s".to_owned()))
        .with("mode", Json::Str("deterministic-simulation".to_owned()));
    for setting in BACKEND_SETTINGS {
        if (setting.reported)(s) {
            o.set(setting.name, to_json((setting.get)(s)));
        }
    }
    o.to_canonical()
}

/// Reads a report's `backend` section onto `s`: required settings must be
/// there, others take their default; members that are not settings are
/// the caller's. Ranges are not checked here.
///
/// # Errors
/// `"backend.{name} must be {shape}"` (path-free; the caller frames it).
pub fn read_report_backend(
    backend: Value<'_>,
    s: &mut Settings,
) -> std::result::Result<(), String> {
    for setting in BACKEND_SETTINGS {
        let value = match backend.get(setting.name) {
            None if setting.file != FileRole::Required => continue,
            None => None,
            Some(v) => read_value(setting, v, false),
        };
        let ok = value.is_some_and(|v| {
            !matches!(&v, SettingValue::Text(t) if t.is_empty()) && (setting.set)(s, v)
        });
        if !ok {
            return Err(format!(
                "backend.{} must be {}",
                setting.name,
                shape(setting)
            ));
        }
    }
    Ok(())
}

fn file_error(message: impl std::fmt::Display) -> Error {
    Error::invalid(format!("field {message}"))
}

/// The settings of a backend file: its `backend` object holds exactly the
/// required settings and any calibrated ones; run settings take their
/// defaults.
///
/// # Errors
/// Not JSON, another document, or a member missing, unknown, of the wrong
/// shape or out of range, named as `field 'backend.x' ...`.
pub fn read_backend_file(bytes: &[u8]) -> Result<Settings> {
    let doc = parse(bytes, JsonLimits::default())?;
    let root = doc.root().filter(Value::is_object);
    let format = root.and_then(|r| r.get("format")).and_then(|f| f.as_str());
    crate::document::expect_format(format, BACKEND)?;
    let Some(root) = root.filter(|_| format == Some(BACKEND)) else {
        return Err(file_error(format_args!("'format' must be '{BACKEND}'")));
    };
    let backend = root.get("backend").filter(Value::is_object);
    let names = |role: FileRole| -> Vec<&str> {
        (BACKEND_SETTINGS.iter())
            .filter(|b| b.file == role)
            .map(|b| b.name)
            .collect()
    };
    let exact = || {
        file_error(format_args!(
            "'backend' must have exactly {} (and {})",
            names(FileRole::Required).join(", "),
            names(FileRole::Calibrated).join(", ")
        ))
    };
    let backend = backend.ok_or_else(exact)?;
    let known = |key: &[u8]| {
        BACKEND_SETTINGS
            .iter()
            .any(|b| b.name.as_bytes() == key && b.file != FileRole::Run)
    };
    let required = BACKEND_SETTINGS
        .iter()
        .filter(|b| b.file == FileRole::Required);
    if !backend.members().all(|(k, _)| known(k))
        || !required.clone().all(|b| backend.get(b.name).is_some())
    {
        return Err(exact());
    }
    let mut s = Settings::default();
    for (key, v) in backend.members() {
        let setting =
            super::backend_setting(std::str::from_utf8(key).unwrap_or("")).expect("checked above");
        if !read_value(setting, v, false).is_some_and(|value| (setting.set)(&mut s, value)) {
            return Err(file_error(format_args!(
                "'backend.{}' must be {}",
                setting.name,
                shape(setting)
            )));
        }
    }
    s.validate().map_err(|e| {
        let name = e.option_name().unwrap_or("backend");
        let name = if name == "backend_label" {
            "label"
        } else {
            name
        };
        file_error(format_args!("'backend.{name}' {}", e.option_rule()))
    })?;
    Ok(s)
}

/// A backend file's canonical bytes: the format, every required and
/// calibrated setting of `s`, and the calibration's `fitted_from` and
/// `errors` (canonical JSON the caller assembled).
///
/// # Errors
/// Settings out of range, or `fitted_from`/`errors` that are not JSON.
pub fn backend_file_json(s: &Settings, fitted_from: &[u8], errors: &[u8]) -> Result<Vec<u8>> {
    s.validate()?;
    let mut backend = Json::object();
    for setting in BACKEND_SETTINGS.iter().filter(|b| b.file != FileRole::Run) {
        backend.set(setting.name, to_json((setting.get)(s)));
    }
    let mut out = Vec::new();
    let mut o = crate::json::canon::ObjectWriter::new(&mut out);
    o.raw("backend", &backend.to_canonical());
    for (key, bytes) in [("errors", errors), ("fitted_from", fitted_from)] {
        let doc = parse(bytes, JsonLimits::default())?;
        let value = doc
            .root()
            .ok_or_else(|| Error::invalid(format!("{key} is empty")))?;
        o.raw(key, &crate::json::canon::to_vec(value));
    }
    o.str("format", BACKEND);
    o.end();
    Ok(out)
}

/// The report schema's `simulated_backend` definition (JSON Schema, draft
/// 2020-12), canonical JSON: a report's `backend` section as
/// [`backend_json`] writes it, one property per setting from its table
/// entry's fragment, plus `mode` and `bandwidth_unit`; the settings every
/// backend file requires are required. `scripts/schemas.py` writes it into
/// `report.schema.json`, and a test keeps the two equal.
#[must_use]
pub fn simulated_backend_schema() -> Vec<u8> {
    use crate::json::canon::ObjectWriter;
    let mut properties: Vec<(&str, &[u8])> = BACKEND_SETTINGS
        .iter()
        .map(|s| (s.name, s.schema.as_bytes()))
        .collect();
    properties.push(("bandwidth_unit", br#"{"const":"Gbit/s"}"#));
    properties.push(("mode", br#"{"const":"deterministic-simulation"}"#));
    properties.sort_by(|a, b| a.0.cmp(b.0));
    let mut required: Vec<&str> = BACKEND_SETTINGS
        .iter()
        .filter(|s| s.file == FileRole::Required)
        .map(|s| s.name)
        .chain(["bandwidth_unit", "mode"])
        .collect();
    required.sort_unstable();
    let mut out = Vec::new();
    let mut o = ObjectWriter::new(&mut out);
    o.bool("additionalProperties", false);
    o.str(
        "description",
        "A simulated run's backend: the A/B knobs, and the calibrated terms written only when set.",
    );
    let mut props = Vec::new();
    let mut p = ObjectWriter::new(&mut props);
    for (name, fragment) in &properties {
        p.raw(name, fragment);
    }
    p.end();
    o.raw("properties", &props);
    o.str_list("required", &required);
    o.str("type", "object");
    o.end();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips() {
        let s = Settings {
            stall_probability: 0.1,
            stall_mean_us: 40.0,
            pipelined_ops: vec!["all_gather".into()],
            op_overrides: vec![OpOverride {
                op: "all_reduce".into(),
                latency_floor_us: 3.0,
                bandwidth_gbps: 9.0,
            }],
            iterations: 3,
            // A request under the default label asks for the job's name.
            label_from_canary: true,
            ..Settings::default()
        };
        assert_eq!(settings_from_request(&request_json(&s)).unwrap(), s);
    }

    #[test]
    fn the_backend_schema_is_json_with_every_setting() {
        let text = simulated_backend_schema();
        let doc = parse(&text, JsonLimits::default()).unwrap();
        let properties = doc.root().unwrap().get("properties").unwrap();
        for setting in BACKEND_SETTINGS {
            let fragment = properties.get(setting.name).unwrap();
            assert!(fragment.is_object(), "{}", setting.name);
        }
        assert_eq!(properties.len(), Some(BACKEND_SETTINGS.len() + 2));
    }

    #[test]
    fn a_request_names_the_bad_member() {
        let e = settings_from_request(br#"{"bandwidth_gbps": null}"#).unwrap_err();
        assert_eq!(e.message(), "bandwidth_gbps must be positive");
        let e = settings_from_request(br#"{"floor_per_step": 1}"#).unwrap_err();
        assert_eq!(e.message(), "floor_per_step must be a boolean");
        let e = settings_from_request(br#"{"op_overrides": [["a", 1, 0]]}"#).unwrap_err();
        assert_eq!(e.option_name(), Some("op_overrides"));
        let e = settings_from_request(br#"{"nope": 1}"#).unwrap_err();
        assert!(e.message().contains("unknown replay setting 'nope'"));
        let s = settings_from_request(br#"{"op_overrides": [["b", 1, 2], ["a", 1, 2]]}"#).unwrap();
        assert_eq!(s.op_overrides[0].op, "a");
    }

    #[test]
    fn a_backend_file_round_trips_and_refuses_what_it_cannot_carry() {
        let s = Settings {
            host_cpus: 2.0,
            serialize_ranks: true,
            ..Settings::default()
        };
        let bytes = backend_file_json(&s, b"[]", b"[]").unwrap();
        assert_eq!(read_backend_file(&bytes).unwrap(), s);
        let text = String::from_utf8(bytes).unwrap();
        let what_if = text.replace(
            "\"compute_pressure\"",
            "\"bytes_scale\":2.0,\"compute_pressure\"",
        );
        let e = read_backend_file(what_if.as_bytes()).unwrap_err();
        assert!(e.message().contains("must have exactly"), "{e}");
        let far = text.replace("\"rate_spread\":0.0", "\"rate_spread\":3.0");
        let e = read_backend_file(far.as_bytes()).unwrap_err();
        assert_eq!(
            e.message(),
            "field 'backend.rate_spread' must be between 0 and 2"
        );
    }

    #[test]
    fn a_label_not_given_is_named_after_the_job() {
        let s = settings_from_request(br#"{"label": null}"#).unwrap();
        assert!(s.label_from_canary);
        assert!(settings_from_request(b"{}").unwrap().label_from_canary);
        assert_eq!(settings_from_request(&request_json(&s)).unwrap(), s);
        assert_eq!(s.label_for(Some("gloo")), "simulated (the job ran on gloo)");
        assert_eq!(s.label_for(Some("nccl")), "simulated-nccl");
        assert_eq!(s.label_for(None), "simulated-nccl");
        let given = settings_from_request(br#"{"label": "mine"}"#).unwrap();
        assert_eq!(given.label_for(Some("gloo")), "mine");
    }

    #[test]
    fn a_report_writes_what_changed() {
        let s = Settings::default();
        let json = String::from_utf8(backend_json(&s)).unwrap();
        assert_eq!(
            json,
            r#"{"bandwidth_gbps":55.0,"bandwidth_unit":"Gbit/s","compute_pressure":0.55,"label":"simulated-nccl","latency_floor_us":7.5,"mode":"deterministic-simulation","overlap_efficiency":0.72}"#
        );
    }
}
