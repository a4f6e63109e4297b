//! numpy's seeding and random streams as gymnasium's environments use them:
//! `SeedSequence` (entropy pool and `generate_state`), the PCG64 bit generator behind
//! `np.random.Generator`, and the draws gymnasium makes from its `np_random`
//! (`integers` for small ranges, `random` and `uniform`). Written from numpy's
//! documented algorithms; checked against numpy by `tests/atari_parity.rs` and the
//! classic-control parity traces.

const POOL_SIZE: usize = 4;
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;

/// numpy's `SeedSequence(entropy)` for an integer entropy without spawn keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedSequence {
    pool: [u32; POOL_SIZE],
}

/// The running multiplier numpy's hashmix threads through successive calls.
struct HashMix {
    multiplier: u32,
}

impl HashMix {
    fn mix(&mut self, value: u32) -> u32 {
        let mut value = value ^ self.multiplier;
        self.multiplier = self.multiplier.wrapping_mul(MULT_A);
        value = value.wrapping_mul(self.multiplier);
        value ^ (value >> XSHIFT)
    }
}

fn mix(x: u32, y: u32) -> u32 {
    let result = MIX_MULT_L
        .wrapping_mul(x)
        .wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    result ^ (result >> XSHIFT)
}

impl SeedSequence {
    pub fn new(entropy: u64) -> Self {
        // An integer becomes its 32-bit words, least significant first; 0 is one zero word.
        let mut words = vec![entropy as u32];
        if entropy >> 32 != 0 {
            words.push((entropy >> 32) as u32);
        }
        let mut hash = HashMix { multiplier: INIT_A };
        let mut pool = [0u32; POOL_SIZE];
        for (index, slot) in pool.iter_mut().enumerate() {
            *slot = hash.mix(words.get(index).copied().unwrap_or(0));
        }
        for source in 0..POOL_SIZE {
            for destination in 0..POOL_SIZE {
                if source != destination {
                    pool[destination] = mix(pool[destination], hash.mix(pool[source]));
                }
            }
        }
        for &word in words.iter().skip(POOL_SIZE) {
            for slot in pool.iter_mut() {
                *slot = mix(*slot, hash.mix(word));
            }
        }
        SeedSequence { pool }
    }

    /// `generate_state(n, dtype=uint32)`.
    pub fn generate_u32(&self, count: usize) -> Vec<u32> {
        let mut multiplier = INIT_B;
        (0..count)
            .map(|index| {
                let mut value = self.pool[index % POOL_SIZE] ^ multiplier;
                multiplier = multiplier.wrapping_mul(MULT_B);
                value = value.wrapping_mul(multiplier);
                value ^ (value >> XSHIFT)
            })
            .collect()
    }

    /// `generate_state(n, dtype=uint64)`: pairs of 32-bit words, low word first.
    pub fn generate_u64(&self, count: usize) -> Vec<u64> {
        self.generate_u32(count * 2)
            .chunks_exact(2)
            .map(|pair| u64::from(pair[0]) | (u64::from(pair[1]) << 32))
            .collect()
    }
}

const PCG_MULTIPLIER: u128 = 0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645;

/// numpy's `Generator(PCG64(seed_sequence))`, for the draws gymnasium makes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NumpyGenerator {
    state: u128,
    increment: u128,
    /// PCG64 hands out 32-bit draws in halves of one 64-bit output, low half first.
    buffered_u32: Option<u32>,
}

crate::snapshot::persist_fields!(NumpyGenerator {
    state,
    increment,
    buffered_u32
});

impl NumpyGenerator {
    pub fn new(seed: &SeedSequence) -> Self {
        let words = seed.generate_u64(4);
        let initial_state = (u128::from(words[0]) << 64) | u128::from(words[1]);
        let sequence = (u128::from(words[2]) << 64) | u128::from(words[3]);
        let mut generator = NumpyGenerator {
            state: 0,
            increment: (sequence << 1) | 1,
            buffered_u32: None,
        };
        generator.advance();
        generator.state = generator.state.wrapping_add(initial_state);
        generator.advance();
        generator
    }

    /// gymnasium's `seeding.np_random(seed)`.
    pub fn from_seed(seed: u64) -> Self {
        Self::new(&SeedSequence::new(seed))
    }

    /// What gymnasium's `Env.reset(seed=seed)` does to `np_random`: a seed starts a
    /// new generator, `None` continues this one.
    pub fn reseed(&mut self, seed: Option<u64>) {
        if let Some(seed) = seed {
            *self = Self::from_seed(seed);
        }
    }

    fn advance(&mut self) {
        self.state = self
            .state
            .wrapping_mul(PCG_MULTIPLIER)
            .wrapping_add(self.increment);
    }

    /// PCG64 (XSL-RR 128/64): the next 64-bit output.
    pub fn next_u64(&mut self) -> u64 {
        self.advance();
        let high = (self.state >> 64) as u64;
        let low = self.state as u64;
        (high ^ low).rotate_right((high >> 58) as u32)
    }

    pub fn next_u32(&mut self) -> u32 {
        if let Some(value) = self.buffered_u32.take() {
            return value;
        }
        let value = self.next_u64();
        self.buffered_u32 = Some((value >> 32) as u32);
        value as u32
    }

    /// `random()`: a double in [0, 1) from the top 53 bits of one 64-bit output. It
    /// leaves a buffered 32-bit half in place, as numpy's PCG64 does.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `uniform(low, high)` for one value: `low + (high - low) * random()`, the
    /// range computed first, as numpy does for scalar and array bounds alike.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        let range = high - low;
        low + range * self.next_f64()
    }

    /// `integers(low, low + count)` minus `low`: uniform in `0..count` by
    /// Lemire's multiply-and-reject on 32-bit draws, as numpy does for ranges
    /// below 2^32. A single-value range consumes no draw, as in numpy.
    pub fn below(&mut self, count: u32) -> u32 {
        if count <= 1 {
            return 0;
        }
        let mut product = u64::from(self.next_u32()) * u64::from(count);
        let mut leftover = product as u32;
        if leftover < count {
            let threshold = count.wrapping_neg() % count;
            while leftover < threshold {
                product = u64::from(self.next_u32()) * u64::from(count);
                leftover = product as u32;
            }
        }
        (product >> 32) as u32
    }
}
