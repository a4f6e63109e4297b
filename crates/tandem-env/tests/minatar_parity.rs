//! MinAtar Breakout parity: replays the committed traces of the `minatar` package
//! (scripts/parity/minatar_traces.py) and requires every observation, reward and
//! terminal flag to match.

use std::io::Read;

use flate2::read::GzDecoder;
use tandem_env::Env;
use tandem_env::minatar::{Asterix, Breakout, Freeway, Seaquest, SpaceInvaders};
use tandem_env::mt19937::RandomState;
use tandem_env::space::ObsBuf;

struct Record {
    is_step: bool,
    action: u8,
    reward: i8,
    terminal: bool,
    state: Vec<bool>,
}

struct Trace {
    seed_kind: u8,
    seed: u64,
    sticky: f64,
    records: Vec<Record>,
}

fn load(name: &str) -> Trace {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let mut bytes = Vec::new();
    GzDecoder::new(std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
        .read_to_end(&mut bytes)
        .unwrap();
    assert_eq!(&bytes[..8], b"TMTRACE2", "{path}: not a trace");
    let channels = usize::from(bytes[8]);
    let seed_kind = bytes[9];
    let seed = u64::from_le_bytes(bytes[10..18].try_into().unwrap());
    let sticky = f64::from_le_bytes(bytes[18..26].try_into().unwrap());
    let count = u32::from_le_bytes(bytes[26..30].try_into().unwrap()) as usize;
    let body = &bytes[30..];
    let cells = 100 * channels;
    let packed_len = cells.div_ceil(8);
    let record = 4 + packed_len;
    assert_eq!(body.len(), count * record, "{path}: truncated");
    let mut packed = vec![0u8; packed_len];
    let records = body
        .chunks_exact(record)
        .map(|r| {
            for (p, d) in packed.iter_mut().zip(&r[4..]) {
                *p ^= d;
            }
            // numpy.packbits: most significant bit first.
            let state = (0..cells)
                .map(|i| packed[i / 8] >> (7 - i % 8) & 1 == 1)
                .collect();
            Record {
                is_step: r[0] == 1,
                action: r[1],
                reward: r[2] as i8,
                terminal: r[3] == 1,
                state,
            }
        })
        .collect();
    Trace {
        seed_kind,
        seed,
        sticky,
        records,
    }
}

/// The minatar-level interface of a native MinAtar game.
trait MinAtarGame {
    fn act_full(&mut self, action: usize) -> (f32, bool);
    fn reset_game(&mut self);
    fn state_hwc(&self) -> Vec<bool>;
}

impl MinAtarGame for Breakout {
    fn act_full(&mut self, action: usize) -> (f32, bool) {
        Breakout::act_full(self, action)
    }
    fn reset_game(&mut self) {
        Breakout::reset_game(self)
    }
    fn state_hwc(&self) -> Vec<bool> {
        Breakout::state_hwc(self).to_vec()
    }
}

impl MinAtarGame for Asterix {
    fn act_full(&mut self, action: usize) -> (f32, bool) {
        Asterix::act_full(self, action)
    }
    fn reset_game(&mut self) {
        Asterix::reset_game(self)
    }
    fn state_hwc(&self) -> Vec<bool> {
        Asterix::state_hwc(self).to_vec()
    }
}

impl MinAtarGame for SpaceInvaders {
    fn act_full(&mut self, action: usize) -> (f32, bool) {
        SpaceInvaders::act_full(self, action)
    }
    fn reset_game(&mut self) {
        SpaceInvaders::reset_game(self)
    }
    fn state_hwc(&self) -> Vec<bool> {
        SpaceInvaders::state_hwc(self)
    }
}

impl MinAtarGame for Seaquest {
    fn act_full(&mut self, action: usize) -> (f32, bool) {
        Seaquest::act_full(self, action)
    }
    fn reset_game(&mut self) {
        Seaquest::reset_game(self)
    }
    fn state_hwc(&self) -> Vec<bool> {
        Seaquest::state_hwc(self)
    }
}

impl MinAtarGame for Freeway {
    fn act_full(&mut self, action: usize) -> (f32, bool) {
        Freeway::act_full(self, action)
    }
    fn reset_game(&mut self) {
        Freeway::reset_game(self)
    }
    fn state_hwc(&self) -> Vec<bool> {
        Freeway::state_hwc(self)
    }
}

fn check(name: &str, expect_steps: usize) {
    check_game(name, expect_steps, |seed, sticky| {
        Breakout::new(seed, sticky, true)
    });
}

fn check_game<G: MinAtarGame>(name: &str, expect_steps: usize, make: impl Fn(u64, f64) -> G) {
    let trace = load(name);
    if trace.seed_kind == 1 {
        assert!(
            trace.seed > u64::from(u32::MAX),
            "{name}: array-seeded traces use seeds beyond 32 bits"
        );
    }
    // Breakout::new seeds like RandomState(seed) below 2^32 and RandomState([lo, hi]) above.
    let mut game = make(trace.seed, trace.sticky);
    let mut steps = 0;
    let mut resets = 0;
    for (i, r) in trace.records.iter().enumerate() {
        if r.is_step {
            let (reward, terminal) = game.act_full(usize::from(r.action));
            assert_eq!(
                (reward, terminal),
                (f32::from(r.reward), r.terminal),
                "{name} record {i}: reward/terminal"
            );
            steps += 1;
        } else {
            if i > 0 {
                game.reset_game();
            }
            resets += 1;
        }
        assert!(
            game.state_hwc() == r.state,
            "{name} record {i}: observation differs"
        );
    }
    assert_eq!(steps, expect_steps, "{name}");
    assert!(resets > 5, "{name}: traces must cover resets");
}

#[test]
fn random_policy_seed_0() {
    check("minatar_breakout_random_seed0.bin.gz", 30_000);
}

#[test]
fn random_policy_64_bit_seed() {
    check("minatar_breakout_random_seed64bit.bin.gz", 30_000);
}

#[test]
fn ball_tracking_policy_seed_42() {
    check("minatar_breakout_tracking_seed42.bin.gz", 40_000);
}

#[test]
fn ball_tracking_policy_large_32_bit_seed() {
    check("minatar_breakout_tracking_seed3141592653.bin.gz", 30_000);
}

/// The same trace through the `Env` interface (the trace's sticky actions and full action
/// set, which the catalogue's game does not use): the channels-first f32 observation is the
/// trace's state reordered.
#[test]
fn env_interface_matches_the_trace() {
    let trace = load("minatar_breakout_tracking_seed42.bin.gz");
    let mut env: Box<dyn Env> = Box::new(Breakout::new(trace.seed, trace.sticky, true));
    let mut obs = vec![0f32; 400];
    for (i, r) in trace.records.iter().enumerate().take(5000) {
        let seed = (i == 0).then_some(trace.seed);
        if r.is_step {
            let step = env.step(
                tandem_env::Action::Discrete(usize::from(r.action)),
                ObsBuf::F32(&mut obs),
            );
            assert_eq!(
                (step.reward, step.terminated),
                (f32::from(r.reward), r.terminal),
                "record {i}"
            );
        } else {
            env.reset(seed, ObsBuf::F32(&mut obs));
        }
        for c in 0..4 {
            for cell in 0..100 {
                assert_eq!(
                    obs[c * 100 + cell] == 1.0,
                    r.state[cell * 4 + c],
                    "record {i} channel {c} cell {cell}"
                );
            }
        }
    }
}

#[test]
fn seeding_matches_numpy_randomstate_for_both_seed_forms() {
    // The first draw of a game is its start side: RandomState(seed).randint(2).
    let mut a = RandomState::from_u64(42);
    let mut b = RandomState::from_u32(42);
    assert_eq!(a.next_u32(), b.next_u32());
    let mut c = RandomState::from_u64((1 << 40) + 12345);
    let mut d = RandomState::from_key(&[12345, 256]);
    assert_eq!(c.next_u32(), d.next_u32());
}

#[test]
fn asterix_random_policy_seed_7() {
    check_game(
        "minatar_asterix_random_seed7.bin.gz",
        50_000,
        |seed, sticky| Asterix::new(seed, sticky, true),
    );
}

#[test]
fn asterix_dodging_policy_64_bit_seed() {
    check_game(
        "minatar_asterix_dodging_seed64bit.bin.gz",
        60_000,
        |seed, sticky| Asterix::new(seed, sticky, true),
    );
}

#[test]
fn freeway_random_policy_seed_11() {
    check_game(
        "minatar_freeway_random_seed11.bin.gz",
        30_000,
        |seed, sticky| Freeway::new(seed, sticky, true),
    );
}

#[test]
fn freeway_crossing_policy_64_bit_seed() {
    check_game(
        "minatar_freeway_crossing_seed64bit.bin.gz",
        30_000,
        |seed, sticky| Freeway::new(seed, sticky, true),
    );
}

#[test]
fn space_invaders_random_policy_seed_5() {
    check_game(
        "minatar_space_invaders_random_seed5.bin.gz",
        30_000,
        |seed, sticky| SpaceInvaders::new(seed, sticky, true),
    );
}

#[test]
fn space_invaders_shooting_policy_64_bit_seed() {
    check_game(
        "minatar_space_invaders_shooting_seed64bit.bin.gz",
        40_000,
        |seed, sticky| SpaceInvaders::new(seed, sticky, true),
    );
}

#[test]
fn seaquest_random_policy_seed_13() {
    check_game(
        "minatar_seaquest_random_seed13.bin.gz",
        30_000,
        Seaquest::new,
    );
}

#[test]
fn seaquest_diving_policy_64_bit_seed() {
    check_game(
        "minatar_seaquest_diving_seed64bit.bin.gz",
        40_000,
        Seaquest::new,
    );
}
