//! Step ranges: a shard of groups ([`super::shard`]) cut further by the
//! job's steps, so that a long job whose groups all join one shard (a gloo
//! job's world `all_reduce` fits every group) still aligns on as many
//! workers as it has ranges, each holding its range's calls only.
//!
//! A *unit* is a run of a shard's ranges. Matching a unit alone gives what
//! matching the whole shard gives for its calls when its end is clean:
//! * every call of the unit comes before every call of the next unit in the
//!   sweep's order ([`UnitCheck::first`] and [`UnitCheck::last`]), so the
//!   whole shard's sweep has matched (and marked taken) each call of the
//!   unit before it opens any instance of the next;
//! * no partner search of the unit reads past the unit's last call on a
//!   member: each rank's piece carries its *fence*, its next call in the
//!   shard, and a search that would match the fence or go on past it marks
//!   the unit as having run on ([`UnitCheck::ran_on`]).
//!
//! Then the next unit's searches meet only taken calls of this one, which
//! they skip. Where an end is not clean, [`settle`] merges the unit with the
//! next and the merged unit is matched again: the result is always what the
//! whole shard gives, and the ranges only decide how much runs apart. Both
//! matching passes are checked (the second reads thread labels, and can
//! search further than the first).

use super::align::SweepKey;
use super::profile::Call;
use crate::byte_form::{Reader, Writer, corrupt};
use crate::error::Result;

/// Profile bytes a unit is cut to hold at most, where the job has steps
/// enough: a worker aligning it holds about this much of the job's calls.
pub const UNIT_PROFILE_BYTES: u64 = 64 << 20;

/// The id of range `range` of shard `shard`, with `ranges` ranges a shard.
#[must_use]
pub fn unit_id(shard: u32, range: u32, ranges: u32) -> u32 {
    shard * ranges + range
}

/// The shard of unit id `id`.
#[must_use]
pub fn shard_of(id: u32, ranges: u32) -> u32 {
    id / ranges.max(1)
}

/// How many ranges to cut each shard into: enough that a unit holds about
/// [`UNIT_PROFILE_BYTES`] of the job's `profile_bytes` and that the job has
/// at least two units per worker thread, never more than the job's steps
/// (`steps`: its first and last step; negative when it has none).
#[must_use]
pub fn range_count(steps: (i64, i64), profile_bytes: u64, shards: u32, threads: u32) -> u32 {
    if steps.0 < 0 || steps.1 < steps.0 {
        return 1;
    }
    let step_count = u32::try_from(steps.1 - steps.0 + 1).unwrap_or(u32::MAX);
    let shards = shards.max(1);
    let by_memory = profile_bytes.div_ceil(UNIT_PROFILE_BYTES * u64::from(shards));
    let by_threads = u64::from(2 * threads.max(1)).div_ceil(u64::from(shards));
    let wanted = by_memory.max(by_threads).max(1);
    u32::try_from(wanted).unwrap_or(u32::MAX).min(step_count)
}

/// The first step of each range but the first, for `ranges` ranges over
/// the job's steps `steps` (first, last): equal runs of steps.
#[must_use]
pub fn range_bounds(steps: (i64, i64), ranges: u32) -> Vec<i64> {
    if steps.0 < 0 || steps.1 < steps.0 || ranges <= 1 {
        return Vec::new();
    }
    let n = steps.1 - steps.0 + 1;
    let ranges = i64::from(ranges).min(n);
    (1..ranges).map(|k| steps.0 + k * n / ranges).collect()
}

/// The range of each of a rank's calls (in its order): the range of its
/// step, a call outside any step in the range of the call before it, and
/// never a range before an earlier call's (a rank's ranges are runs of its
/// calls).
#[must_use]
pub fn call_ranges(calls: &[Call], bounds: &[i64]) -> Vec<u32> {
    let mut current = 0_u32;
    calls
        .iter()
        .map(|c| {
            if c.step >= 0 {
                let r = bounds.partition_point(|&b| b <= c.step) as u32;
                current = current.max(r);
            }
            current
        })
        .collect()
}

/// Where a unit's calls lie in the sweep's order, and whether a partner
/// search of its matching ran past its fences.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitCheck {
    /// The key of its first call in the sweep's order (`None`: no call).
    pub first: Option<SweepKey>,
    /// The key of its last call.
    pub last: Option<SweepKey>,
    /// A partner search would have matched a fence or read past it.
    pub ran_on: bool,
}

/// Bytes of an encoded [`UnitCheck`].
const CHECK_BYTES: usize = 2 * 25 + 1;

fn before(a: &SweepKey, b: &SweepKey) -> bool {
    a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)) == std::cmp::Ordering::Less
}

impl UnitCheck {
    /// The check of calls with keys `keys`, and whether a search ran on.
    #[must_use]
    pub fn of(keys: impl IntoIterator<Item = SweepKey>, ran_on: bool) -> Self {
        let (mut first, mut last): (Option<SweepKey>, Option<SweepKey>) = (None, None);
        for k in keys {
            if first.is_none_or(|f| before(&k, &f)) {
                first = Some(k);
            }
            if last.is_none_or(|l| before(&l, &k)) {
                last = Some(k);
            }
        }
        Self {
            first,
            last,
            ran_on,
        }
    }

    /// Whether matching this unit and `next` (the shard's next unit) apart
    /// gives what matching them together gives.
    #[must_use]
    pub fn ends_clean_before(&self, next: &Self) -> bool {
        !self.ran_on
            && match (self.last, next.first) {
                (Some(last), Some(first)) => before(&last, &first),
                _ => true,
            }
    }

    /// As bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(CHECK_BYTES));
        for key in [self.first, self.last] {
            w.0.push(u8::from(key.is_some()));
            let (at, slot, call) = key.unwrap_or((0.0, 0, 0));
            w.f64(at);
            w.u64(slot as u64);
            w.u64(call as u64);
        }
        w.0.push(u8::from(self.ran_on));
        w.0
    }

    /// From [`UnitCheck::encode`]'s bytes.
    ///
    /// # Errors
    /// Bytes that are not an encoded check.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != CHECK_BYTES {
            return Err(corrupt());
        }
        let mut r = Reader::new(&bytes[..CHECK_BYTES - 1]);
        let mut key = || -> Result<Option<SweepKey>> {
            let present = r.take(1)?[0];
            let k = (r.f64()?, r.u64()? as usize, r.u64()? as usize);
            match present {
                0 => Ok(None),
                1 => Ok(Some(k)),
                _ => Err(corrupt()),
            }
        };
        let (first, last) = (key()?, key()?);
        let ran_on = match bytes[CHECK_BYTES - 1] {
            0 => false,
            1 => true,
            _ => return Err(corrupt()),
        };
        Ok(Self {
            first,
            last,
            ran_on,
        })
    }
}

/// The units after one round of checks: each unit (its ids, ascending;
/// units in order, a shard's in range order) merged with the next of its
/// shard while its end is not clean, and the indices (in the new list) of
/// the units made by merging, which are matched again.
///
/// # Errors
/// Not one check per unit, or units that are not in order.
pub fn settle(
    units: &[Vec<u32>],
    checks: &[UnitCheck],
    ranges: u32,
) -> Result<(Vec<Vec<u32>>, Vec<usize>)> {
    if checks.len() != units.len()
        || units.iter().any(Vec::is_empty)
        || units.windows(2).any(|w| w[0].last() >= w[1].first())
    {
        return Err(corrupt());
    }
    let mut out: Vec<Vec<u32>> = Vec::with_capacity(units.len());
    let mut merged: Vec<usize> = Vec::new();
    let mut open: Option<UnitCheck> = None; // the check of `out`'s last unit's tail
    for (unit, check) in units.iter().zip(checks) {
        let joins = match (out.last(), open) {
            (Some(prev), Some(tail)) => {
                shard_of(prev[0], ranges) == shard_of(unit[0], ranges)
                    && !tail.ends_clean_before(check)
            }
            _ => false,
        };
        if joins {
            let at = out.len() - 1;
            out[at].extend_from_slice(unit);
            if merged.last() != Some(&at) {
                merged.push(at);
            }
        } else {
            out.push(unit.clone());
        }
        open = Some(*check);
    }
    Ok((out, merged))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::kineto::ops::Kind;

    #[test]
    fn ranges_cut_steps_evenly_and_follow_a_rank_in_order() {
        assert_eq!(range_bounds((0, 9), 3), vec![3, 6]);
        assert_eq!(range_bounds((2, 3), 5), vec![3]);
        assert!(range_bounds((-1, -1), 4).is_empty());
        assert_eq!(range_count((0, 99), 0, 1, 2), 4);
        assert_eq!(range_count((0, 1), 1 << 40, 1, 2), 2);
        assert_eq!(range_count((-1, -1), 1 << 40, 1, 8), 1);
        let call = |step| {
            let mut c = Call::bare(Kind::AllReduce, 0.0, 1.0);
            c.step = step;
            c
        };
        let calls: Vec<Call> = [-1, 0, 4, -1, 3, 7, -1].into_iter().map(call).collect();
        assert_eq!(call_ranges(&calls, &[3, 6]), vec![0, 0, 1, 1, 1, 2, 2]);
    }

    #[test]
    fn checks_round_trip_and_settle_merges_unclean_ends_within_a_shard() {
        let clean = |first: f64, last: f64| UnitCheck::of([(first, 0, 0), (last, 1, 3)], false);
        let c = clean(1.0, 2.0);
        assert_eq!(UnitCheck::decode(&c.encode()).unwrap(), c);
        assert!(UnitCheck::decode(&c.encode()[1..]).is_err());
        let none = UnitCheck::of([], true);
        assert_eq!(UnitCheck::decode(&none.encode()).unwrap(), none);
        // Shard 0 has ranges 0..3, shard 1 ranges 3..6 (ranges = 3).
        let units = vec![vec![0], vec![1], vec![2], vec![3], vec![4]];
        let ran_on = UnitCheck::of([(2.5, 0, 1)], true);
        let checks = [
            clean(0.0, 1.0),
            ran_on,
            clean(3.0, 4.0),
            ran_on,
            clean(9.0, 9.5),
        ];
        let (out, merged) = settle(&units, &checks, 3).unwrap();
        assert_eq!(out, vec![vec![0], vec![1, 2], vec![3, 4]]);
        assert_eq!(merged, vec![1, 2]);
        // Calls out of order across an end merge too; a shard's last unit
        // never joins the next shard's first.
        let late = [clean(0.0, 5.0), clean(4.0, 6.0), clean(7.0, 8.0)];
        let (out, _) = settle(&[vec![0], vec![1], vec![3]], &late, 3).unwrap();
        assert_eq!(out, vec![vec![0, 1], vec![3]]);
        assert!(settle(&units, &checks[1..], 3).is_err());
        assert!(settle(&[vec![1], vec![0]], &checks[..2], 3).is_err());
    }
}
