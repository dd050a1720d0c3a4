//! The trace builder, fed from typed fields, yields a trace the v1 reader
//! reads back identically: same columns, same signatures, same commitment.

use commcanary_core::trace::{
    EventExtras, EventTiming, LoadOptions, Trace, TraceBuilder, flag, load, load_bytes,
};

fn example(name: &str) -> Trace {
    let path = format!(
        "{}/../../examples/traces/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    load(path.as_ref(), &LoadOptions::default()).expect("example trace loads")
}

/// Rebuilds `trace` event by event through `push_event`.
fn rebuild(trace: &Trace) -> Trace {
    let mut b = TraceBuilder::new();
    for (key, value) in &trace.members {
        b.set_member(key, value.clone());
    }
    let ev = &trace.events;
    for i in 0..ev.len() {
        let sig = &trace.signatures[ev.signature[i] as usize];
        let timing = EventTiming {
            start_us: ev.start_us[i],
            gap_us: ev.gap_us[i],
            arrival_skew_us: ev.arrival_skew_us[i],
            compute_before_us: ev.compute_before_us[i],
            compute_overlap_us: ev.compute_overlap_us[i],
            compute_pressure: ev.compute_pressure[i],
            observed_exposed_us: ev.observed_exposed_us[i],
            device_us: ev.device_us[i],
            step: if ev.step[i].is_nan() {
                -1
            } else {
                ev.step[i] as i64
            },
            flags: ev.flags[i],
        };
        let arrivals = (ev.flags[i] & flag::HAS_ARRIVAL_MAP != 0).then(|| {
            let at = ev.arrival_at[i] as usize;
            &ev.arrivals[at..at + sig.rank_count()]
        });
        b.push_event(sig, &timing, arrivals, &EventExtras::default());
    }
    b.finish(Vec::new())
}

fn projection(trace: &Trace) -> Vec<u8> {
    let order: Vec<u32> = (0..trace.events.len() as u32).collect();
    let mut out = Vec::new();
    trace.write_projection(&order, &mut |piece| out.extend_from_slice(piece));
    out
}

#[test]
fn built_traces_read_back_identically() {
    for name in ["llama70b_tp8_trace.json", "llama70b_tp8_trace_long.json"] {
        let original = example(name);
        let built = rebuild(&original);
        let text = projection(&built);
        let reread = load_bytes(&text, &LoadOptions::default()).expect("built trace reads");
        assert_eq!(reread.signatures, original.signatures, "{name}");
        let (a, b) = (&reread.events, &original.events);
        assert_eq!(a.signature, b.signature);
        assert_eq!(a.flags, b.flags);
        assert_eq!(a.arrivals, b.arrivals);
        for (x, y) in [
            (&a.start_us, &b.start_us),
            (&a.gap_us, &b.gap_us),
            (&a.arrival_skew_us, &b.arrival_skew_us),
            (&a.compute_before_us, &b.compute_before_us),
            (&a.compute_overlap_us, &b.compute_overlap_us),
            (&a.compute_pressure, &b.compute_pressure),
            (&a.observed_exposed_us, &b.observed_exposed_us),
        ] {
            let bits = |v: &Vec<f64>| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(x), bits(y), "{name}");
        }
        // The built trace's own commitment equals the one of its re-read text.
        let order: Vec<u32> = (0..built.events.len() as u32).collect();
        assert_eq!(
            built.projection_digest(&order),
            reread.projection_digest(&order)
        );
    }
}

#[test]
fn the_builder_interns_signatures_and_sets_the_format() {
    let original = example("llama70b_tp8_trace.json");
    let mut b = TraceBuilder::new();
    let sig = &original.signatures[0];
    let timing = EventTiming {
        gap_us: 1.5,
        ..EventTiming::default()
    };
    let extras = EventExtras {
        id: Some("e-0"),
        metadata: Some(b"{\"k\":1}"),
    };
    b.push_event(sig, &timing, None, &extras);
    b.push_event(sig, &timing, None, &EventExtras::default());
    let t = b.finish(Vec::new());
    assert_eq!(t.signatures.len(), 1);
    assert_eq!(t.events.len(), 2);
    assert_eq!(t.member("format"), Some(&b"\"commcanary.trace.v1\""[..]));
    assert!(
        std::str::from_utf8(t.canonical_json(0))
            .unwrap()
            .contains("\"id\":\"e-0\",\"metadata\":{\"k\":1}")
    );
}
