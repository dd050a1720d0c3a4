//! Research controls: the traces a canary is measured against.
//!
//! * [`baseline`] — the reference's five stand-ins for a workload (one
//!   isolated event per shape, random and stratified samples, frequency and
//!   cluster representatives), each marked as a baseline in its workload.
//! * [`reduce`] — ddmin over events with the ranking oracle: the smallest
//!   subset whose model still ranks every pair of configurations alike.
//! * [`pyrandom`] — CPython's `random.Random`, so samples match the
//!   reference's for a seed.
//!
//! Both write a new `commcanary.trace.v1` through [`OutputTrace`]: events as
//! canonical objects (members sorted), the source's `system` copied, and its
//! `workload` copied with the control's note appended and its marker
//! members (`baseline_method`, or `reduction_method` and the `reduction`
//! ledger) set, which the strict compile gate reads.

pub mod baseline;
pub mod pyrandom;
pub mod reduce;

use crate::error::Result;
use crate::json::canon::{self, ObjectWriter};
use crate::json::{Doc, JsonLimits, Value, parse_into};
use crate::trace::{LoadOptions, TRACE_FORMAT, Trace, load_owned};

/// An event being written: members as `(key, canonical value)`, sorted on
/// write.
#[derive(Debug, Default)]
pub(crate) struct EventOut {
    members: Vec<(String, Vec<u8>)>,
}

impl EventOut {
    /// The members of `source` (a canonical event object) named in `keep`.
    pub(crate) fn copy(source: &[u8], keep: &[&str], doc: &mut Doc) -> Result<Self> {
        *doc = parse_into(source, JsonLimits::default(), std::mem::take(doc))?;
        let mut out = Self::default();
        if let Some(root) = doc.root() {
            for (key, value) in root.members() {
                let key = String::from_utf8_lossy(key);
                if keep.contains(&key.as_ref()) {
                    out.set_raw(&key, canon::to_vec(value));
                }
            }
        }
        Ok(out)
    }

    /// Whether member `key` is present.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.members.iter().any(|(k, _)| k == key)
    }

    /// Sets member `key` to canonical JSON `value`.
    pub(crate) fn set_raw(&mut self, key: &str, value: Vec<u8>) {
        match self.members.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.members.push((key.to_owned(), value)),
        }
    }

    pub(crate) fn set_f64(&mut self, key: &str, x: f64) {
        let mut v = Vec::new();
        canon::write_f64(&mut v, x);
        self.set_raw(key, v);
    }

    pub(crate) fn set_i64(&mut self, key: &str, x: i64) {
        let mut v = Vec::new();
        canon::write_i64(&mut v, x);
        self.set_raw(key, v);
    }

    pub(crate) fn set_str(&mut self, key: &str, s: &str) {
        let mut v = Vec::new();
        canon::write_str(&mut v, s);
        self.set_raw(key, v);
    }

    pub(crate) fn remove(&mut self, key: &str) {
        self.members.retain(|(k, _)| k != key);
    }

    /// Appends the object to `out`.
    pub(crate) fn write(mut self, out: &mut Vec<u8>) {
        self.members.sort_by(|a, b| a.0.cmp(&b.0));
        let mut o = ObjectWriter::new(out);
        for (k, v) in &self.members {
            o.raw(k, v);
        }
        o.end();
    }
}

/// A control's output trace, assembled from its events.
pub(crate) struct OutputTrace {
    events: Vec<u8>,
    count: usize,
}

impl OutputTrace {
    pub(crate) fn new() -> Self {
        Self {
            events: vec![b'['],
            count: 0,
        }
    }

    pub(crate) fn push(&mut self, event: EventOut) {
        self.separate();
        event.write(&mut self.events);
    }

    /// Appends an event already in canonical JSON.
    pub(crate) fn push_raw(&mut self, canonical: &[u8]) {
        self.separate();
        self.events.extend_from_slice(canonical);
    }

    fn separate(&mut self) {
        if self.count > 0 {
            self.events.push(b',');
        }
        self.count += 1;
    }

    /// The trace: `events`, `format`, the source's `system`, and its
    /// `workload` with `note` appended to `notes` (a space between) and
    /// `markers` set. Loaded back, so the result is a valid trace.
    pub(crate) fn finish(
        mut self,
        source: &Trace,
        note: &str,
        markers: &[(&str, Vec<u8>)],
    ) -> Result<Trace> {
        self.events.push(b']');
        let mut doc = Vec::with_capacity(self.events.len() + 512);
        let mut o = ObjectWriter::new(&mut doc);
        o.raw("events", &self.events);
        o.str("format", TRACE_FORMAT);
        if let Some(system) = source.member("system") {
            o.raw("system", system);
        }
        o.raw(
            "workload",
            &workload(source.member("workload"), note, markers)?,
        );
        o.end();
        load_owned(doc, &LoadOptions::default())
    }
}

/// The source's workload object with `note` appended and `markers` set.
fn workload(source: Option<&[u8]>, note: &str, markers: &[(&str, Vec<u8>)]) -> Result<Vec<u8>> {
    let mut out = EventOut::default();
    let mut notes = String::new();
    if let Some(bytes) = source {
        let mut doc = Doc::new();
        doc = parse_into(bytes, JsonLimits::default(), doc)?;
        if let Some(root) = doc.root().filter(Value::is_object) {
            for (key, value) in root.members() {
                let key = String::from_utf8_lossy(key);
                if key == "notes" {
                    notes = value.as_str().map(str::to_owned).unwrap_or_default();
                } else {
                    out.set_raw(&key, canon::to_vec(value));
                }
            }
        }
    }
    let joined = if notes.is_empty() {
        note.to_owned()
    } else {
        format!("{notes} {note}")
    };
    out.set_str("notes", &joined);
    for (key, value) in markers {
        out.set_raw(key, value.clone());
    }
    let mut bytes = Vec::new();
    out.write(&mut bytes);
    Ok(bytes)
}
