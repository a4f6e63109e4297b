//! Small, fast, seedable random streams for games and wrappers that need no parity
//! with another implementation: xoshiro256++ seeded through SplitMix64.

/// SplitMix64's output finaliser: a bijection on u64 with strong avalanche.
pub fn splitmix64_finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A seed for sub-stream `stream` of `seed` (e.g. one per wrapper in a chain).
pub fn derive_seed(seed: u64, stream: u64) -> u64 {
    splitmix64_finalize(seed ^ splitmix64_finalize(stream.wrapping_add(0x9e37_79b9_7f4a_7c15)))
}

/// xoshiro256++ (Blackman and Vigna).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xoshiro256 {
    s: [u64; 4],
}

crate::snapshot::persist_fields!(Xoshiro256 { s });

impl Xoshiro256 {
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            splitmix64_finalize(x)
        };
        // SplitMix64 never yields four zero words from one seed, so the state is valid.
        Xoshiro256 {
            s: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in `0..n` (`n > 0`), without modulo bias (Lemire's method).
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let threshold = n.wrapping_neg() % n;
        loop {
            let product = u128::from(self.next_u64()) * u128::from(n);
            if (product as u64) >= threshold {
                return (product >> 64) as u64;
            }
        }
    }

    /// Uniform in `[low, high)`.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = Xoshiro256::new(3);
        let mut counts = [0u32; 7];
        for _ in 0..7000 {
            counts[rng.below(7) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Xoshiro256::new(1);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Xoshiro256::new(1);
        assert_eq!(a, (0..4).map(|_| r.next_u64()).collect::<Vec<_>>());
        assert_ne!(Xoshiro256::new(1).next_u64(), Xoshiro256::new(2).next_u64());
        assert_ne!(derive_seed(5, 1), derive_seed(5, 2));
        let f = Xoshiro256::new(9).next_f64();
        assert!((0.0..1.0).contains(&f));
    }
}
