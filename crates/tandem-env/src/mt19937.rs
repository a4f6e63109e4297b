//! The Mersenne Twister MT19937 (Matsumoto and Nishimura, 1998) and the methods of
//! numpy's legacy `RandomState` that MinAtar draws from, reproducing numpy's streams
//! exactly: seeding from an integer or an array, `rand`, `randint` and `choice`.

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// MT19937 with numpy's `RandomState` helpers.
#[derive(Clone)]
pub struct RandomState {
    state: Box<[u32; N]>,
    index: usize,
}

impl std::fmt::Debug for RandomState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RandomState")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl crate::snapshot::Persist for RandomState {
    fn save(&self, out: &mut Vec<u8>) {
        self.state.save(out);
        self.index.save(out);
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), crate::EnvError> {
        self.state.load(input)?;
        self.index.load(input)?;
        if self.index > N {
            return Err(crate::snapshot::snapshot_error(format!(
                "corrupt: MT19937 position {} is beyond its {N} words",
                self.index
            )));
        }
        Ok(())
    }
}

impl Default for RandomState {
    fn default() -> Self {
        RandomState::from_u32(0)
    }
}

impl RandomState {
    /// `numpy.random.RandomState(seed)` for an integer seed (0..2^32).
    pub fn from_u32(seed: u32) -> Self {
        let mut state = Box::new([0u32; N]);
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        RandomState { state, index: N }
    }

    /// `numpy.random.RandomState(key)` for a 1-d array of 32-bit words.
    pub fn from_key(key: &[u32]) -> Self {
        let mut rs = RandomState::from_u32(19_650_218);
        let mt = &mut rs.state;
        let mut i = 1usize;
        let mut j = 0usize;
        for _ in 0..N.max(key.len()) {
            let prev = mt[i - 1];
            mt[i] = (mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key.get(j).copied().unwrap_or(0))
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = mt[i - 1];
            mt[i] =
                (mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        // The most significant bit is set so the state can never be all zeros.
        mt[0] = 0x8000_0000;
        rs.index = N;
        rs
    }

    /// A stream for a 64-bit seed: `RandomState(seed)` when it fits in 32 bits,
    /// otherwise `RandomState([low 32 bits, high 32 bits])`.
    pub fn from_u64(seed: u64) -> Self {
        match u32::try_from(seed) {
            Ok(small) => RandomState::from_u32(small),
            Err(_) => RandomState::from_key(&[seed as u32, (seed >> 32) as u32]),
        }
    }

    // Runs once per 624 outputs; kept out of line so that `next_u32` inlines.
    #[cold]
    #[inline(never)]
    fn regenerate(&mut self) {
        let mt = &mut self.state;
        let twist = |current: u32, next: u32, far: u32| {
            let y = (current & UPPER_MASK) | (next & LOWER_MASK);
            far ^ (y >> 1) ^ if y & 1 != 0 { MATRIX_A } else { 0 }
        };
        // The same recurrence as one loop over (i + 1) % N and (i + M) % N, split where
        // the indices wrap so that no modulo is computed per word.
        for i in 0..N - M {
            mt[i] = twist(mt[i], mt[i + 1], mt[i + M]);
        }
        for i in N - M..N - 1 {
            mt[i] = twist(mt[i], mt[i + 1], mt[i + M - N]);
        }
        mt[N - 1] = twist(mt[N - 1], mt[0], mt[M - 1]);
        self.index = 0;
    }

    /// The next 32-bit output (tempered).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            self.regenerate();
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// `RandomState.rand()`: a double in [0, 1) from 53 bits of two outputs.
    #[inline]
    pub fn rand(&mut self) -> f64 {
        let high = u64::from(self.next_u32() >> 5);
        let low = u64::from(self.next_u32() >> 6);
        (high * 67_108_864 + low) as f64 / 9_007_199_254_740_992.0
    }

    /// `RandomState.randint(low, high)` for one value in `low..high` (`high > low`,
    /// range below 2^32), by masked rejection as numpy's legacy generator does.
    pub fn randint(&mut self, low: i64, high: i64) -> i64 {
        assert!(high > low, "randint needs high > low");
        let range = (high - low - 1) as u64;
        if range == 0 {
            return low;
        }
        assert!(
            range <= u64::from(u32::MAX),
            "ranges of 2^32 or more are not implemented"
        );
        let range = range as u32;
        let mask = u32::MAX >> range.leading_zeros();
        loop {
            let v = self.next_u32() & mask;
            if v <= range {
                return low + i64::from(v);
            }
        }
    }

    /// `RandomState.choice(n)`: a uniform index in `0..n`.
    pub fn choice(&mut self, n: usize) -> usize {
        self.randint(0, n as i64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_outputs_of_the_original_init_by_array() {
        // The reference implementation's published check: init_by_array({0x123, 0x234,
        // 0x345, 0x456}) starts 1067595299 955945823 477289528 4107218783 4228976476.
        let mut rs = RandomState::from_key(&[0x123, 0x234, 0x345, 0x456]);
        let first: Vec<u32> = (0..5).map(|_| rs.next_u32()).collect();
        assert_eq!(
            first,
            [
                1_067_595_299,
                955_945_823,
                477_289_528,
                4_107_218_783,
                4_228_976_476
            ]
        );
    }

    #[test]
    fn seed_5489_gives_the_standard_first_output() {
        // 5489 is the reference default seed; its 10000th output is 4123659995.
        let mut rs = RandomState::from_u32(5489);
        assert_eq!(rs.next_u32(), 3_499_211_612);
        let mut rs = RandomState::from_u32(5489);
        let v = (0..10_000).map(|_| rs.next_u32()).last().unwrap();
        assert_eq!(v, 4_123_659_995);
    }

    #[test]
    fn numpy_seed_zero_rand_and_randint() {
        // numpy: RandomState(0).rand() == 0.5488135039273248;
        // RandomState(0).randint(0, 10, 5) == [5, 0, 3, 3, 7].
        assert_eq!(RandomState::from_u32(0).rand(), 0.548_813_503_927_324_8);
        let mut rs = RandomState::from_u32(0);
        let v: Vec<i64> = (0..5).map(|_| rs.randint(0, 10)).collect();
        assert_eq!(v, [5, 0, 3, 3, 7]);
    }
}
