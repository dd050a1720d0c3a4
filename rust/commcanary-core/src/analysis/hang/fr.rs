//! Flight Recorder dumps reduced to the [`Model`]: one dump per rank (of
//! several snapshots of a rank, the newest that still has a call in
//! flight, else the newest), the job's groups with their
//! membership resolved, and each entry as an [`Op`].
//!
//! Membership: `pg_config` is a hint that can be empty (gloo) or wrong. A
//! group's members are the ranks whose own entries use it, plus the ranks a
//! `pg_config` (any dump's, or the traces' `distributedInfo`) lists that
//! have no dump or whose own dump does not contradict it; the default group
//! holds every rank of the world. What the dumps and the hint disagree on is
//! noted, never silently taken.
//!
//! Same-job checks (errors): one group name with two descriptions or two
//! declared rank lists; two dumps of one rank whose common entries differ;
//! a rank whose collectives were created, by the median over the ones it
//! shares with the others, further apart than the collective timeout.

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::model::{Model, NONE, Op, RankEvidence, Source, user_frame};
use crate::error::{Error, Result};
use crate::import::flight_recorder::{EntryState, FrDump};

/// One dump as given: its label (file name) and the rank it belongs to.
pub struct LabeledDump {
    /// The file, for messages.
    pub label: String,
    /// The rank (from the file name).
    pub rank: i64,
    /// The dump.
    pub dump: FrDump,
}

/// Groups declared outside the dumps (the traces' `distributedInfo`).
pub type Declared = Vec<(String, String, Vec<i64>)>;

/// Declared rank lists by group name: `(desc, ranks, who declared them)`.
type DeclaredByName = BTreeMap<String, (String, Vec<i64>, String)>;

/// Whether some dump cannot record point-to-point calls: gloo's Flight
/// Recorder records its collectives only (no entry of these dumps is a
/// send or receive).
#[must_use]
pub fn lack_p2p(dumps: &[LabeledDump]) -> bool {
    let gloo = dumps.iter().any(|d| {
        d.dump
            .entries
            .iter()
            .any(|e| d.dump.text(e.name).starts_with("gloo:"))
    });
    gloo && dumps
        .iter()
        .all(|d| d.dump.entries.iter().all(|e| !e.is_p2p))
}

/// Adds the dumps to `model`.
///
/// # Errors
/// Dumps of different jobs or runs (see the module doc).
pub fn add_dumps(model: &mut Model, dumps: Vec<LabeledDump>, declared: &Declared) -> Result<()> {
    let dumps = newest_per_rank(dumps)?;
    check_versions(&dumps)?;
    let own = crate::import::nccl_profiler::evidence::ENCODING;
    let logged: Vec<i64> = dumps
        .iter()
        .filter(|d| d.dump.encoding == own)
        .map(|d| d.rank)
        .collect();
    if !logged.is_empty() {
        model.notes.push(format!(
            "{} rank(s) read from the NCCL profiler plugin's logs as Flight Recorder entries: NCCL's own sequence numbers, a call pending until every kernel channel and proxy operation of it stopped",
            logged.len()
        ));
    }
    let names = group_names(&dumps)?;
    for (name, desc) in &names {
        model.group_index(name, desc);
    }
    let config = declared_groups(&dumps, declared)?;
    // Ops are built in parallel with the dump's own text and stack indices,
    // then moved onto the model's interned ones.
    let built: Vec<RankEvidence> = dumps.par_iter().map(|d| rank_ops(model, d)).collect();
    for (d, mut ev) in dumps.iter().zip(built) {
        let texts: Vec<u32> = d.dump.texts.iter().map(|t| model.intern(t)).collect();
        // Dtypes in the traces' canonical names (`Float` is `float32`), so
        // a rank known from its trace compares with one known from its dump.
        let dtypes: FxHashMap<u32, u32> = d
            .dump
            .entries
            .iter()
            .flat_map(|e| [e.in_dtypes, e.out_dtypes])
            .filter_map(|i| {
                let raw = d.dump.texts.get(i as usize)?;
                Some((i, model.intern(&canonical_dtypes(raw))))
            })
            .collect();
        let frames: Vec<u32> = d
            .dump
            .stacks
            .iter()
            .map(|s| user_frame(s).map_or(NONE, |f| model.intern_frame(&f)))
            .collect();
        let text = |i: u32| texts.get(i as usize).copied().unwrap_or(NONE);
        for o in &mut ev.ops {
            o.in_sizes = text(o.in_sizes);
            o.out_sizes = text(o.out_sizes);
            o.in_dtypes = dtypes.get(&o.in_dtypes).copied().unwrap_or(NONE);
            o.out_dtypes = dtypes.get(&o.out_dtypes).copied().unwrap_or(NONE);
            o.frame = frames.get(o.frame as usize).copied().unwrap_or(NONE);
        }
        model.ranks.insert(d.rank, ev);
    }
    let dumps: Vec<LabeledDump> = dumps
        .into_iter()
        .map(|mut d| {
            d.dump.entries = Vec::new();
            d
        })
        .collect();
    resolve_membership(model, &dumps, &config);
    check_same_run(model, &dumps)?;
    Ok(())
}

/// A dump's comma-joined dtype names in canonical form (`Float,Long` →
/// `float32,int64`); a name not known is kept as written.
fn canonical_dtypes(raw: &str) -> String {
    raw.split(',')
        .map(|d| crate::import::kineto::ops::dtype(d).map_or(d, |(c, _)| c))
        .collect::<Vec<_>>()
        .join(",")
}

fn newest_per_rank(dumps: Vec<LabeledDump>) -> Result<Vec<LabeledDump>> {
    let mut by_rank: BTreeMap<i64, Vec<LabeledDump>> = BTreeMap::new();
    for d in dumps {
        by_rank.entry(d.rank).or_default().push(d);
    }
    let mut out = Vec::new();
    for (rank, mut list) in by_rank {
        for pair in list.windows(2) {
            if !same_snapshot_run(&pair[0].dump, &pair[1].dump) {
                return Err(Error::invalid(format!(
                    "{}: a second dump of rank {rank} (like {}) whose entries differ from it: dumps of different runs",
                    pair[1].label, pair[0].label
                )));
            }
        }
        let newest = |d: &LabeledDump| {
            let last = d
                .dump
                .entries
                .iter()
                .map(|e| e.record_id)
                .max()
                .unwrap_or(-1);
            let pending = d.dump.entries.iter().filter(|e| !e.retired).count();
            // A snapshot taken while the rank waited shows where it is
            // stuck; a later one, after the error retired the call, looks
            // complete (gloo records no completion time to tell them apart).
            (pending > 0, last, pending)
        };
        list.sort_by_key(|d| std::cmp::Reverse(newest(d)));
        out.push(list.swap_remove(0));
    }
    Ok(out)
}

/// Two snapshots of one rank agree on every entry they share.
fn same_snapshot_run(a: &FrDump, b: &FrDump) -> bool {
    let key = |d: &FrDump, i: usize| {
        let e = &d.entries[i];
        (
            e.record_id,
            d.groups[e.group as usize].0.clone(),
            e.seq,
            e.op_id,
        )
    };
    let times: FxHashMap<_, i64> = (0..a.entries.len())
        .map(|i| (key(a, i), a.entries[i].created_ns))
        .collect();
    (0..b.entries.len()).all(|i| {
        times
            .get(&key(b, i))
            .is_none_or(|&t| t == b.entries[i].created_ns)
    })
}

fn check_versions(dumps: &[LabeledDump]) -> Result<()> {
    // The plugin's logs stand beside dumps of any version.
    let own = crate::import::nccl_profiler::evidence::ENCODING;
    let mut real = dumps.iter().filter(|d| d.dump.encoding != own);
    let Some(first) = real.next() else {
        return Ok(());
    };
    for d in real {
        if d.dump.version != first.dump.version {
            return Err(Error::invalid(format!(
                "{}: Flight Recorder version '{}' but {} has '{}': dumps of different jobs",
                d.label, d.dump.version, first.label, first.dump.version
            )));
        }
    }
    Ok(())
}

/// Every group name the entries use, with its one description.
fn group_names(dumps: &[LabeledDump]) -> Result<Vec<(String, String)>> {
    let mut seen: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for (k, d) in dumps.iter().enumerate() {
        for (name, desc) in &d.dump.groups {
            match seen.get(name) {
                Some((other, j)) if other != desc => {
                    return Err(Error::invalid(format!(
                        "{}: process group '{name}' is '{desc}' here but '{other}' in {}: dumps of different jobs",
                        d.label, dumps[*j].label
                    )));
                }
                Some(_) => {}
                None => {
                    seen.insert(name.clone(), (desc.clone(), k));
                }
            }
        }
    }
    Ok(seen.into_iter().map(|(n, (d, _))| (n, d)).collect())
}

/// Declared rank lists by group name: every dump's `pg_config` and the
/// traces'; two different lists for one name are different jobs.
fn declared_groups(dumps: &[LabeledDump], declared: &Declared) -> Result<DeclaredByName> {
    let mut out: DeclaredByName = BTreeMap::new();
    for (name, desc, ranks) in declared {
        out.insert(
            name.clone(),
            (
                desc.clone(),
                ranks.clone(),
                "the traces' distributedInfo".into(),
            ),
        );
    }
    for d in dumps {
        for row in &d.dump.pg_config {
            let Some(ranks) = &row.ranks else { continue };
            match out.get(&row.name) {
                Some((_, other, from)) if other != ranks => {
                    return Err(Error::invalid(format!(
                        "{}: pg_config says group '{}' has ranks {ranks:?}, but {from} says {other:?}: dumps of different jobs",
                        d.label, row.name
                    )));
                }
                Some(_) => {}
                None => {
                    out.insert(
                        row.name.clone(),
                        (
                            row.desc.clone(),
                            ranks.clone(),
                            format!("{}'s pg_config", d.label),
                        ),
                    );
                }
            }
        }
    }
    Ok(out)
}

/// A dump's entries as ops, in ring order; texts and frames still index the
/// dump's own tables (the caller interns them).
fn rank_ops(model: &Model, d: &LabeledDump) -> RankEvidence {
    let dump = &d.dump;
    let index: Vec<usize> = dump
        .groups
        .iter()
        .map(|(n, _)| model.group_named(n).unwrap_or(0))
        .collect();
    let mut order: Vec<usize> = (0..dump.entries.len()).collect();
    order.sort_by_key(|&i| (dump.entries[i].record_id, i));
    let ops = order
        .iter()
        .map(|&i| {
            let e = &dump.entries[i];
            let failed_nccl = dump.timing && e.retired && e.state != EntryState::Completed;
            Op {
                group: index[e.group as usize],
                seq: if e.is_p2p { e.p2p_seq } else { e.seq },
                p2p: e.is_p2p,
                peer: e.peer,
                peer_is_global: false,
                root: -1,
                op: e.op,
                in_sizes: e.in_sizes,
                out_sizes: e.out_sizes,
                in_dtypes: e.in_dtypes,
                out_dtypes: e.out_dtypes,
                pending: !e.retired || failed_nccl,
                time_ns: e.created_ns,
                step: -1,
                frame: u32::try_from(e.stack).unwrap_or(NONE),
                timeout_ms: e.timeout_ms,
                done_ns: e.completed_ns,
            }
        })
        .collect();
    let first_record = dump.entries.iter().map(|e| e.record_id).min().unwrap_or(0);
    let status = dump
        .pg_status
        .iter()
        .filter_map(|s| {
            let e = dump.entries.iter().find(|e| e.pg_id == s.pg_id)?;
            Some((index[e.group as usize], s.enqueued, s.completed))
        })
        .collect();
    RankEvidence {
        ops,
        source: Some(Source::FlightRecorder),
        from_start: first_record <= 0,
        covers_from_ns: dump
            .entries
            .iter()
            .map(|e| e.created_ns)
            .filter(|&t| t > 0)
            .min()
            .unwrap_or(0),
        status,
        files: vec![d.label.clone()],
        ..RankEvidence::default()
    }
}

fn resolve_membership(model: &mut Model, dumps: &[LabeledDump], config: &DeclaredByName) {
    let dumped: BTreeSet<i64> = dumps.iter().map(|d| d.rank).collect();
    let mut world = dumped.iter().next_back().map_or(0, |r| r + 1);
    for (_, ranks, _) in config.values() {
        world = world.max(ranks.iter().max().map_or(0, |r| r + 1));
    }
    // gloo's unnamed pg_config row lists a group's ranks: the world holds
    // them, though the group is not known.
    for d in dumps {
        world = world.max(d.dump.unnamed_ranks.last().map_or(0, |r| r + 1));
    }
    model.world = model.world.max(world);
    for (name, (desc, _, _)) in config {
        model.group_index(name, desc);
    }
    let mut users: Vec<BTreeSet<i64>> = vec![BTreeSet::new(); model.groups.len()];
    for (&r, ev) in &model.ranks {
        let mut used: Vec<usize> = ev.ops.iter().map(|o| o.group).collect();
        used.sort_unstable();
        used.dedup();
        for g in used {
            users[g].insert(r);
        }
    }
    let mut notes = Vec::new();
    for (gi, users) in users.iter().enumerate() {
        let name = model.groups[gi].name.clone();
        let (ranks, how) = membership(
            model,
            gi,
            users,
            config.get(&name),
            dumps,
            &dumped,
            &mut notes,
        );
        model.groups[gi].ranks = ranks;
        model.groups[gi].membership = how;
    }
    model.notes.extend(notes);
}

#[allow(clippy::too_many_arguments)]
fn membership(
    model: &Model,
    gi: usize,
    users: &BTreeSet<i64>,
    declared: Option<&(String, Vec<i64>, String)>,
    dumps: &[LabeledDump],
    dumped: &BTreeSet<i64>,
    notes: &mut Vec<String>,
) -> (Vec<i64>, String) {
    let g = &model.groups[gi];
    let is_default = g.desc == "default_pg" || (g.name == "0" && declared.is_none());
    if let Some((_, ranks, from)) = declared {
        let undeclared: Vec<i64> = users
            .iter()
            .filter(|r| !ranks.contains(r))
            .copied()
            .collect();
        if undeclared.is_empty() {
            return (
                ranks.clone(),
                format!("declared ({from}), consistent with the entries"),
            );
        }
        notes.push(format!(
            "group '{}': {from} lists ranks {ranks:?} but ranks {undeclared:?} issued its collectives; membership taken from the entries",
            g.name
        ));
        let mut all: BTreeSet<i64> = users.clone();
        all.extend(
            ranks
                .iter()
                .filter(|r| !contradicts(dumps, dumped, **r, &g.name)),
        );
        return (
            all.into_iter().collect(),
            "the entries (the declared list disagreed)".into(),
        );
    }
    if is_default {
        return (
            (0..model.world).collect(),
            "the default group: every rank of the world".into(),
        );
    }
    (
        users.iter().copied().collect(),
        "the ranks whose entries use it (no pg_config)".into(),
    )
}

/// Whether rank `r`'s own dump says it is not in group `name` (its
/// `pg_config` is filled and does not list it).
fn contradicts(dumps: &[LabeledDump], dumped: &BTreeSet<i64>, r: i64, name: &str) -> bool {
    if !dumped.contains(&r) {
        return false;
    }
    dumps.iter().filter(|d| d.rank == r).any(|d| {
        !d.dump.pg_config.is_empty() && d.dump.pg_config.iter().all(|row| row.name != name)
    })
}

/// Refuses a rank whose collectives were created, by the median over those
/// it shares with the lowest other member, further apart than the timeout.
/// When each collective (group, sequence number) was first created, and by
/// whom (the lowest rank that has it): dense per group when the sequence
/// numbers are (they count from 1), a hash map for any that are not.
struct FirstCreated {
    dense: Vec<Vec<(i64, i64)>>,
    sparse: FxHashMap<(usize, i64), (i64, i64)>,
}

impl FirstCreated {
    fn get(&self, group: usize, seq: i64) -> Option<&(i64, i64)> {
        let dense = usize::try_from(seq)
            .ok()
            .and_then(|s| self.dense.get(group)?.get(s))
            .filter(|e| e.0 >= 0);
        dense.or_else(|| self.sparse.get(&(group, seq)))
    }
}

fn first_created(model: &Model) -> FirstCreated {
    let timed = |o: &&Op| !o.p2p && o.time_ns > 0;
    let ops: usize = model.ranks.values().map(|e| e.ops.len()).sum();
    // Dense rows sized by each group's highest sequence number, bounded by
    // the ops there are (a stray huge number goes to the hash map).
    let mut rows = vec![0usize; model.groups.len()];
    for ev in model.ranks.values() {
        for o in ev.ops.iter().filter(timed) {
            if let (Some(row), Ok(s)) = (rows.get_mut(o.group), usize::try_from(o.seq)) {
                if s < ops {
                    *row = (*row).max(s + 1);
                }
            }
        }
    }
    let dense_total: usize = rows.iter().sum();
    if dense_total > 4 * ops + 1024 {
        rows.iter_mut().for_each(|r| *r = 0);
    }
    let mut out = FirstCreated {
        dense: rows.iter().map(|&n| vec![(-1, 0); n]).collect(),
        sparse: FxHashMap::default(),
    };
    for (&rank, ev) in &model.ranks {
        for o in ev.ops.iter().filter(timed) {
            let slot = usize::try_from(o.seq)
                .ok()
                .and_then(|s| out.dense.get_mut(o.group)?.get_mut(s));
            match slot {
                Some(e) if e.0 < 0 => *e = (rank, o.time_ns),
                Some(_) => {}
                None => {
                    out.sparse
                        .entry((o.group, o.seq))
                        .or_insert((rank, o.time_ns));
                }
            }
        }
    }
    out
}

fn check_same_run(model: &Model, dumps: &[LabeledDump]) -> Result<()> {
    let created = first_created(model);
    // Each other rank's median distance from those times, in parallel.
    let medians: Vec<(i64, (i64, i64))> = model
        .ranks
        .par_iter()
        .filter_map(|(&rank, ev)| {
            let mut gaps: Vec<(i64, i64)> = ev
                .ops
                .iter()
                .filter(|o| !o.p2p && o.time_ns > 0)
                .filter_map(|o| match created.get(o.group, o.seq) {
                    Some(&(first, t)) if first != rank => {
                        Some(((o.time_ns - t).abs(), o.timeout_ms.max(60_000)))
                    }
                    _ => None,
                })
                .collect();
            let mid = gaps.len() / 2;
            (!gaps.is_empty()).then(|| (rank, *gaps.select_nth_unstable(mid).1))
        })
        .collect();
    for (rank, (gap, timeout)) in medians {
        if gap / 1_000_000 > timeout {
            let label = dumps
                .iter()
                .find(|d| d.rank == rank)
                .map_or("", |d| d.label.as_str());
            return Err(Error::invalid(format!(
                "{label}: rank {rank}'s collectives were created {:.1} s away from the same collectives on other ranks (median), more than the {} ms timeout: dumps of different runs",
                gap as f64 / 1e9,
                timeout
            )));
        }
    }
    Ok(())
}
