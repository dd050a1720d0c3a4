//! Reading dumps: both encodings of the real gloo hang fixture, field
//! errors naming the entry and the field, and what is refused.

use super::{EntryState, read_dump, sniff};

const FIXTURE: &str = "hang/gloo_tp4_rank3_skips_allreduce/fr_during_hang";

fn fixture(name: &str) -> Option<Vec<u8>> {
    Some(crate::test_data::fixture_bytes(&format!(
        "{FIXTURE}/{name}"
    )))
}

fn small(entries: &str) -> Vec<u8> {
    format!(
        r#"{{"version":"2.10","pg_config":{{"0":{{"name":"0","desc":"default_pg","ranks":"[0, 1]"}}}},"pg_status":{{"0":{{"last_enqueued_collective":"2","last_started_collective":"-1","last_completed_collective":"1"}}}},"entries":[{entries}]}}"#
    )
    .into_bytes()
}

const ENTRY: &str = r#"{"record_id":0,"pg_id":0,"process_group":["0","default_pg"],"collective_seq_id":1,"p2p_seq_id":0,"op_id":1,"profiling_name":"nccl:all_reduce","time_created_ns":5,"time_discovered_started_ns":6,"time_discovered_completed_ns":0,"duration_ms":0.5,"input_sizes":[[2,3]],"input_dtypes":["Float"],"output_sizes":[[2,3]],"output_dtypes":["Float"],"state":"started","retired":false,"timeout_ms":600000,"is_p2p":false}"#;

#[test]
fn a_json_dump_reads_into_entries() {
    let dump = read_dump(&small(ENTRY)).unwrap();
    assert_eq!(dump.encoding, "json");
    assert_eq!(dump.pg_config[0].ranks, Some(vec![0, 1]));
    assert_eq!(
        (dump.pg_status[0].enqueued, dump.pg_status[0].completed),
        (2, 1)
    );
    let e = &dump.entries[0];
    assert_eq!(
        (e.seq, e.op, e.in_numel, e.state),
        (1, "all_reduce", 6, EntryState::Started)
    );
    assert_eq!(dump.text(e.in_sizes), "[[2,3]]");
    assert!(dump.timing && !e.retired);
}

#[test]
fn a_wrong_field_names_the_entry_and_the_field() {
    let bad = ENTRY.replace(r#""collective_seq_id":1"#, r#""collective_seq_id":"x""#);
    let err = read_dump(&small(&format!("{ENTRY},{bad}"))).unwrap_err();
    assert!(
        err.message()
            .starts_with("entries[1].collective_seq_id: expected an integer"),
        "{}",
        err.message()
    );
    let bad = ENTRY.replace(r#""state":"started""#, r#""state":"lost""#);
    let err = read_dump(&small(&bad)).unwrap_err();
    assert!(
        err.message().contains("entries[0].state"),
        "{}",
        err.message()
    );
}

#[test]
fn not_a_dump_is_refused() {
    let no_entries = br#"{"version":"2.10","pg_config":{}}"#;
    assert!(
        read_dump(no_entries)
            .unwrap_err()
            .message()
            .contains("no 'entries'")
    );
    assert!(
        read_dump(br#"{"a":1}"#)
            .unwrap_err()
            .message()
            .contains("not a Flight Recorder dump")
    );
    assert!(read_dump(b"hello").is_err());
    assert!(read_dump(b"").is_err());
    assert!(sniff(&small(ENTRY)) && !sniff(br#"{"traceEvents":[]}"#));
}

#[test]
fn the_fixture_reads_the_same_from_pickle_and_json() {
    let (Some(pickle), Some(json)) = (fixture("fr_trace_rank_3"), fixture("fr_trace_rank_3.json"))
    else {
        return;
    };
    let p = read_dump(&pickle).unwrap();
    let j = read_dump(&json).unwrap();
    assert_eq!((p.encoding, j.encoding), ("pickle", "json"));
    assert_eq!(p.entries.len(), 112);
    assert_eq!(p.pg_status, j.pg_status);
    assert!(
        p.pg_config.is_empty(),
        "gloo's empty pg_config row is no group"
    );
    assert_eq!(p.unnamed_ranks, j.unnamed_ranks);
    for (a, b) in p.entries.iter().zip(&j.entries) {
        assert_eq!(
            (a.seq, a.op_id, a.op, a.retired, a.created_ns),
            (b.seq, b.op_id, b.op, b.retired, b.created_ns)
        );
        assert_eq!(p.groups[a.group as usize], j.groups[b.group as usize]);
    }
    let last = p.entries.last().unwrap();
    assert_eq!(
        (
            last.seq,
            p.groups[last.group as usize].1.as_str(),
            last.retired
        ),
        (27, "tp_pair_1", false)
    );
    assert!(
        last.stack >= 0 && j.entries.last().unwrap().stack < 0,
        "only the pickle has frames"
    );
}
