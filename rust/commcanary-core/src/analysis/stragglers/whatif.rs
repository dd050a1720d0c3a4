//! The what-if replay of one step: each rank's calls in order, each call's
//! arrival its previous end plus the rank's own measured gap (compute or
//! idle), each instance starting when its last member arrives, each member
//! leaving its measured time after that start. Replayed unchanged it gives
//! the measured step back; replayed with one arrival earlier (or one time
//! inside shorter) it gives the step that would have been. A member made
//! shorter inside caps every member's time inside that instance at its new
//! time (a collective completes together).

use rustc_hash::FxHashMap;

/// One member of an instance in a step, measured (job clock, µs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Visit {
    /// Global rank.
    pub rank: i64,
    /// When it called.
    pub arrival: f64,
    /// When it left.
    pub end: f64,
}

/// One instance of a step: its members, in any order.
#[derive(Debug, Clone, PartialEq)]
pub struct StepInstance {
    /// The members.
    pub visits: Vec<Visit>,
}

/// A change to replay: `rank` at instance `at` arrives `earlier_us` sooner
/// and spends `shorter_us` less time inside.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// Index into the step's instances.
    pub at: usize,
    /// The rank changed.
    pub rank: i64,
    /// How much earlier it arrives (≥ 0).
    pub earlier_us: f64,
    /// How much less time it spends inside after the last arrival (≥ 0).
    pub shorter_us: f64,
}

/// The step's end (the latest member end) when replayed with `change`.
/// `instances` must be in order of their first arrival.
#[must_use]
pub fn replay(instances: &[StepInstance], change: Option<Change>) -> f64 {
    // Per rank: (measured end, replayed end) of its previous instance.
    let mut last: FxHashMap<i64, (f64, f64)> = FxHashMap::default();
    let mut step_end = f64::NEG_INFINITY;
    for (k, inst) in instances.iter().enumerate() {
        let measured_start = inst
            .visits
            .iter()
            .map(|v| v.arrival)
            .fold(f64::NEG_INFINITY, f64::max);
        let mut start = f64::NEG_INFINITY;
        for v in &inst.visits {
            let earlier = match change {
                Some(c) if c.at == k && c.rank == v.rank => c.earlier_us,
                _ => 0.0,
            };
            let arrival = match last.get(&v.rank) {
                // Its own gap after its previous instance, kept.
                Some(&(was, now)) => now + (v.arrival - was).max(0.0),
                // Its first instance in the step: where it measured.
                None => v.arrival,
            };
            start = start.max(arrival - earlier);
        }
        // A member made shorter inside ends sooner, and a collective
        // completes together: nobody else stays past its new end (they were
        // waiting for it), though whoever left earlier keeps its own time.
        let cap = match change {
            Some(c) if c.at == k && c.shorter_us > 0.0 => (inst.visits.iter())
                .find(|v| v.rank == c.rank)
                .map_or(f64::INFINITY, |v| {
                    ((v.end - measured_start).max(0.0) - c.shorter_us).max(0.0)
                }),
            _ => f64::INFINITY,
        };
        for v in &inst.visits {
            let inside = (v.end - measured_start).max(0.0).min(cap);
            let end = start + inside;
            step_end = step_end.max(end);
            last.insert(v.rank, (v.end, end));
        }
    }
    step_end
}

/// Step time saved by `change` (µs, ≥ 0).
#[must_use]
pub fn saved(instances: &[StepInstance], change: Change) -> f64 {
    (replay(instances, None) - replay(instances, Some(change))).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn earlier(at: usize, rank: i64, by: f64) -> Change {
        Change {
            at,
            rank,
            earlier_us: by,
            shorter_us: 0.0,
        }
    }

    fn inst(visits: &[(i64, f64, f64)]) -> StepInstance {
        StepInstance {
            visits: visits
                .iter()
                .map(|&(rank, arrival, end)| Visit { rank, arrival, end })
                .collect(),
        }
    }

    #[test]
    fn a_late_first_arrival_costs_what_the_others_waited() {
        // Rank 1 arrives 60 late at the first collective; everyone waits.
        let step = [
            inst(&[(0, 0.0, 70.0), (1, 60.0, 70.0)]),
            inst(&[(0, 80.0, 90.0), (1, 80.0, 90.0)]),
        ];
        assert_eq!(replay(&step, None), 90.0);
        let undo = earlier(0, 1, 60.0);
        assert_eq!(saved(&step, undo), 60.0);
        // Undoing a lag on the rank that was not last saves nothing.
        let other = Change { rank: 0, ..undo };
        assert_eq!(saved(&step, other), 0.0);
    }

    #[test]
    fn a_slow_member_holds_up_the_whole_collective() {
        // All arrive at 0; rank 1 is slow inside, everyone leaves at 100;
        // the collective normally takes 10.
        let step = [
            inst(&[(0, 0.0, 100.0), (1, 0.0, 101.0)]),
            inst(&[(0, 110.0, 120.0), (1, 111.0, 121.0)]),
        ];
        let faster = Change {
            at: 0,
            rank: 1,
            earlier_us: 0.0,
            shorter_us: 91.0,
        };
        assert_eq!(saved(&step, faster), 91.0);
    }

    #[test]
    fn slack_absorbs_a_lag() {
        // Rank 1 is 30 late to rank 0, but the step ends when rank 2, which
        // starts its part late on its own, finishes with rank 1.
        let step = [
            inst(&[(0, 0.0, 40.0), (1, 30.0, 40.0)]),
            inst(&[(1, 50.0, 110.0), (2, 100.0, 110.0)]),
        ];
        let undo = earlier(0, 1, 30.0);
        assert_eq!(replay(&step, None), 110.0);
        assert_eq!(saved(&step, undo), 0.0);
    }
}
