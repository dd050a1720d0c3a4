//! CPython's `random.Random`, as far as the research controls use it: seeding
//! from an integer, `getrandbits`, `_randbelow`, `sample` and `choice`, so
//! that the random and stratified baselines pick exactly the events the
//! reference picks for the same seed.
//!
//! The generator is MT19937 (`rand_mt::Mt`); seeding an integer `a` is
//! `init_by_array` over the 32-bit words of `|a|`, least significant first
//! (`[0]` for zero), as CPython's `random_seed` does.

use rand_mt::Mt;

/// A `random.Random(seed)`.
pub struct PyRandom {
    mt: Mt,
}

impl PyRandom {
    /// `random.Random(seed)`.
    #[must_use]
    pub fn new(seed: i64) -> Self {
        let magnitude = seed.unsigned_abs();
        let key: Vec<u32> = if magnitude >> 32 == 0 {
            vec![magnitude as u32]
        } else {
            vec![magnitude as u32, (magnitude >> 32) as u32]
        };
        Self {
            mt: Mt::new_with_key(key),
        }
    }

    /// `getrandbits(k)` for `1 <= k <= 64`: 32-bit words least significant
    /// first, the last one's low bits dropped.
    pub fn getrandbits(&mut self, k: u32) -> u64 {
        debug_assert!((1..=64).contains(&k));
        let mut out = 0u64;
        let (mut left, mut shift) = (k, 0);
        while left > 0 {
            let mut word = u64::from(self.mt.next_u32());
            if left < 32 {
                word >>= 32 - left;
            }
            out |= word << shift;
            shift += 32;
            left = left.saturating_sub(32);
        }
        out
    }

    /// `_randbelow(n)`: rejection sampling on `n.bit_length()` bits; 0 for
    /// `n == 0`.
    pub fn randbelow(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let k = 64 - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `sample(range(n), k)` (`k <= n`): a partial shuffle of a pool when the
    /// population is small next to `k`, else draws with a set of the taken.
    pub fn sample(&mut self, n: usize, k: usize) -> Vec<usize> {
        debug_assert!(k <= n);
        let mut setsize: f64 = 21.0;
        if k > 5 {
            let exponent = ((k as f64 * 3.0).ln() / 4f64.ln()).ceil();
            setsize += 4f64.powf(exponent);
        }
        if (n as f64) <= setsize {
            let mut pool: Vec<usize> = (0..n).collect();
            (0..k)
                .map(|i| {
                    let j = self.randbelow((n - i) as u64) as usize;
                    let picked = pool[j];
                    pool[j] = pool[n - i - 1];
                    picked
                })
                .collect()
        } else {
            let mut taken = rustc_hash::FxHashSet::default();
            (0..k)
                .map(|_| {
                    loop {
                        let j = self.randbelow(n as u64) as usize;
                        if taken.insert(j) {
                            break j;
                        }
                    }
                })
                .collect()
        }
    }

    /// `choice(seq)` for a sequence of `len > 0` items: the index picked.
    pub fn choice(&mut self, len: usize) -> usize {
        self.randbelow(len as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::PyRandom;

    // Values printed by CPython 3.11 for the same calls.
    #[test]
    fn matches_cpython() {
        assert_eq!(PyRandom::new(0).getrandbits(32), 3_626_764_237);
        assert_eq!(PyRandom::new(3).getrandbits(40), 649_562_111_997);
        assert_eq!(
            PyRandom::new(1 << 40).getrandbits(64),
            6_515_814_827_016_330_625
        );
        // A pool shuffle (small population) and set draws (large one).
        assert_eq!(
            PyRandom::new(11).sample(100, 8),
            [57, 71, 99, 59, 65, 75, 24, 23]
        );
        assert_eq!(
            PyRandom::new(0).sample(56, 8),
            [54, 24, 48, 26, 2, 16, 32, 31]
        );
        assert_eq!(
            PyRandom::new(3).sample(100_000, 10),
            [
                31190, 77678, 71333, 17094, 48490, 79157, 62135, 82014, 76133, 8588
            ]
        );
        let mut r = PyRandom::new(-5);
        let picks: Vec<usize> = (0..6).map(|_| r.choice(7)).collect();
        assert_eq!(picks, [4, 2, 5, 2, 6, 5]);
    }
}
