//! Sequence motifs: back-to-back repetitions of a block of groups.
//!
//! Applied to the flat group list when it has at least four groups. Two
//! groups match when their leaves are identical (same signature and the same
//! timing records), which the caller expresses as equal `keys`. Scanning from
//! position `i`, every template length `ℓ ∈ 2..=min(16, N/2, (N−i)/2)` is tried;
//! the template repeats `r` times back to back; `r ≥ 2` saves `ℓ·r − 1` stored
//! events. The largest saving wins, ties going to the longer template; the
//! motif then covers `ℓ·r` groups and the scan jumps past it.

use crate::canary::Block;

/// Longest template considered.
pub const MAX_TEMPLATE: usize = 16;

/// How many times the template `keys[start..start + len]` occurs back to
/// back from `start`: none when it does not fit (or `len` is 0), else at
/// least one. Step recovery uses it too, to check that a job's
/// once-per-step collectives repeat as one block.
#[must_use]
pub fn back_to_back(keys: &[u32], start: usize, len: usize) -> usize {
    if len == 0 || start + len > keys.len() {
        return 0;
    }
    let template = &keys[start..start + len];
    (keys[start..].chunks_exact(len))
        .take_while(|chunk| *chunk == template)
        .count()
}

/// Program blocks for groups with motif keys `keys` (leaf `i` is group `i`).
#[must_use]
pub fn find_motifs(keys: &[u32], enabled: bool) -> Vec<Block> {
    let n = keys.len();
    if !enabled || n < 4 {
        return (0..n as u32).map(Block::Leaf).collect();
    }
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < n {
        let max_len = MAX_TEMPLATE.min(n / 2).min((n - i) / 2);
        let mut best: Option<(usize, usize, usize)> = None; // (saved, len, repeats)
        for len in 2..=max_len {
            let repeats = back_to_back(keys, i, len);
            if repeats >= 2 {
                let saved = len * repeats - 1;
                if best.is_none_or(|(s, l, _)| saved > s || (saved == s && len > l)) {
                    best = Some((saved, len, repeats));
                }
            }
        }
        match best {
            Some((_, len, repeats)) => {
                blocks.push(Block::Motif {
                    first_leaf: i as u32,
                    leaf_count: len as u32,
                    repeats: repeats as u64,
                });
                i += len * repeats;
            }
            None => {
                blocks.push(Block::Leaf(i as u32));
                i += 1;
            }
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_template_wins_ties() {
        // A,B x6: lengths 2, 4 and 6 all save 11; the longest wins.
        let keys = [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1];
        assert_eq!(
            find_motifs(&keys, true),
            vec![Block::Motif {
                first_leaf: 0,
                leaf_count: 6,
                repeats: 2
            }]
        );
    }

    #[test]
    fn no_motif_without_repetition() {
        let keys = [0, 1, 2, 3, 4];
        assert_eq!(find_motifs(&keys, true).len(), 5);
        assert_eq!(find_motifs(&[0, 1, 0, 1], false).len(), 4);
    }

    #[test]
    fn motif_after_prefix() {
        let keys = [7, 0, 1, 0, 1, 0, 1, 9];
        let blocks = find_motifs(&keys, true);
        assert_eq!(blocks[0], Block::Leaf(0));
        assert_eq!(
            blocks[1],
            Block::Motif {
                first_leaf: 1,
                leaf_count: 2,
                repeats: 3
            }
        );
        assert_eq!(blocks[2], Block::Leaf(7));
    }
}
