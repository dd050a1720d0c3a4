//! The multi-rank Kineto import on the real fixtures (skipped when the
//! shared fixtures are not present).

use std::path::{Path, PathBuf};

use commcanary_core::import::kineto::{JobOptions, Source, import_job, read_file};
use commcanary_core::import::stream::ScanLimits;

/// A fixture in the repository's `tests/data/fixtures/` (gzipped there);
/// a missing one fails the test.
fn fixture(rel: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/fixtures");
    let p = if root.join(rel).exists() {
        root.join(rel)
    } else {
        root.join(format!("{rel}.gz"))
    };
    assert!(p.exists(), "test fixture missing: {}", p.display());
    Some(p)
}

fn import(paths: &[PathBuf]) -> commcanary_core::import::kineto::JobImport {
    let profiles = paths
        .iter()
        .map(|p| read_file(Source::Path(p), &ScanLimits::default(), None).unwrap())
        .collect();
    let labels: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    import_job(
        profiles,
        &labels,
        &JobOptions {
            workload_name: "t".into(),
            ..JobOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn gloo_decode_fixture() {
    let Some(dir) = fixture("kineto/gloo_tp4_decode") else {
        return;
    };
    let paths: Vec<PathBuf> = (0..4)
        .map(|r| dir.join(format!("rank{r}.json.gz")))
        .collect();
    let job = import(&paths);
    eprintln!("{:?}", job.counts);
    for p in job.partial.iter().take(5) {
        eprintln!("partial {p:?}");
    }
    let t = &job.trace;
    let mut by: std::collections::BTreeMap<(String, String), usize> = Default::default();
    for &s in &t.events.signature {
        let sig = &t.signatures[s as usize];
        *by.entry((
            String::from_utf8_lossy(&sig.op).into(),
            String::from_utf8_lossy(&sig.group).into(),
        ))
        .or_default() += 1;
    }
    eprintln!("{by:?}");
    assert_eq!(job.partial.len(), 0);
}

#[test]
fn hang_fixture_windows() {
    let Some(dir) = fixture("hang/gloo_tp4_rank3_skips_allreduce") else {
        return;
    };
    let mut paths = Vec::new();
    for r in 0..4 {
        for w in 1..=3 {
            paths.push(dir.join(format!("rank{r}.window{w}.json.gz")));
        }
    }
    let job = import(&paths);
    eprintln!("{:?}", job.counts);
    for p in &job.partial {
        eprintln!("partial {p:?}");
    }
}
