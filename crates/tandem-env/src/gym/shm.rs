//! The shared-memory file through which a rank and its gymnasium workers exchange
//! observations, actions, rewards, flags and the values of the experiment's `info-keys`: its
//! layout (one array per field, every environment a row, each array 64-byte aligned; the
//! worker builds numpy views from the same offsets; a PettingZoo game's row of actions,
//! rewards and flags holds one entry per agent, its observation row every agent's) and the
//! Rust side's mapping.
//!
//! Who writes what, and when: the rank writes the action rows before it sends a step
//! request and the `ready` / `stepped` bytes of an environment while consuming that
//! environment's result; a worker writes its own environments' rows only between
//! receiving a request and replying. The pipe round trip orders the two sides, so no
//! byte is written by both at once.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::EnvError;

/// Byte offsets of each array, named as the worker names its views.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Layout {
    pub n: usize,
    /// A PettingZoo game's agents, whose rows of actions, rewards and flags hold one entry
    /// each; `None` for gymnasium's one.
    pub agents: Option<usize>,
    /// Bytes of one environment's observation row (a game's: all its agents').
    pub obs_bytes: usize,
    /// Bytes of one agent's action.
    pub act_bytes: usize,
    /// How many `info-keys` each step's row holds (f64 each).
    pub info_keys: usize,
    pub obs: usize,
    pub fin: usize,
    pub act: usize,
    pub rew: usize,
    pub info: usize,
    pub term: usize,
    pub trunc: usize,
    pub stepped: usize,
    pub ready: usize,
    pub seeded: usize,
    pub seed: usize,
    /// A turn-based game's agent to act next, by its index (u64 per environment).
    pub turn: usize,
    /// 1 for each agent of a PettingZoo game that has left it before the others (from the
    /// step it left at until the game's reset), 0 for those that play.
    pub left: usize,
    pub size: usize,
}

impl Layout {
    /// `n` environments (of `agents` agents each, for PettingZoo), with `obs_bytes` per environment's
    /// observation, `act_bytes` per agent's action and `info_keys` info values per step.
    pub fn new(
        n: usize,
        agents: Option<usize>,
        obs_bytes: usize,
        act_bytes: usize,
        info_keys: usize,
    ) -> Self {
        let per = agents.unwrap_or(1);
        let mut at = 0;
        let mut next = |bytes: usize| {
            let start = at;
            at = (at + bytes).div_ceil(64) * 64;
            start
        };
        let obs = next(n * obs_bytes);
        let fin = next(n * obs_bytes);
        let act = next(n * per * act_bytes);
        let rew = next(n * per * 8);
        let info = next(n * info_keys * 8);
        let seed = next(n * 8);
        let turn = next(n * 8);
        let term = next(n * per);
        let trunc = next(n * per);
        let left = next(n * per);
        let stepped = next(n);
        let ready = next(n);
        let seeded = next(n);
        Layout {
            n,
            agents,
            obs_bytes,
            act_bytes,
            info_keys,
            obs,
            fin,
            act,
            rew,
            info,
            term,
            trunc,
            stepped,
            ready,
            seeded,
            seed,
            turn,
            left,
            size: at.max(64),
        }
    }

    /// The offsets as the worker's second configuration line wants them.
    pub fn to_json(&self, path: &Path) -> serde_json::Value {
        serde_json::json!({
            "shm": path.to_string_lossy(),
            "size": self.size,
            "n": self.n,
            // Absent for gymnasium, whose rows hold one action, reward and flag.
            "agents": self.agents,
            "offsets": {
                "obs": self.obs, "final": self.fin, "act": self.act, "rew": self.rew, "info": self.info,
                "term": self.term, "trunc": self.trunc, "stepped": self.stepped,
                "ready": self.ready, "seeded": self.seeded, "seed": self.seed,
                "turn": self.turn, "left": self.left,
            },
        })
    }
}

/// The mapped file. The file itself is unlinked once every worker has mapped it
/// ([`Shm::unlink`]), so nothing is left behind however the processes end.
pub(crate) struct Shm {
    ptr: *mut u8,
    pub layout: Layout,
    path: Option<PathBuf>,
}

// SAFETY: the mapping is plain memory owned by this value; concurrent access follows
// the ownership rule of the module documentation (each environment's rows are touched
// by one thread at a time), which every accessor below relies on.
unsafe impl Send for Shm {}
// SAFETY: as for Send: accessors only touch one environment's bytes, and callers never
// hand the same environment to two threads at once.
unsafe impl Sync for Shm {}

impl Shm {
    /// Creates and maps a zeroed file for `layout` in /dev/shm (the temporary directory
    /// where there is no /dev/shm).
    pub fn create(layout: Layout) -> Result<Self, EnvError> {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = Path::new("/dev/shm");
        let dir = if dir.is_dir() {
            dir.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let serial = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("tandem-gym-{}-{serial}", std::process::id()));
        let fail = |what: &str, e: std::io::Error| {
            EnvError::Backend(format!(
                "cannot {what} the shared-memory file {}: {e}",
                path.display()
            ))
        };
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| fail("create", e))?;
        let mut shm = Shm {
            ptr: std::ptr::null_mut(),
            layout,
            path: Some(path.clone()),
        };
        file.set_len(shm.layout.size as u64)
            .map_err(|e| fail("size", e))?;
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared read-write mapping of a file we just sized to
        // `layout.size` bytes; the kernel picks the address. The file descriptor may
        // close afterwards: the mapping keeps the file alive.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                shm.layout.size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(fail("map", std::io::Error::last_os_error()));
        }
        shm.ptr = ptr.cast();
        Ok(shm)
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Removes the file's name; the mappings stay valid.
    pub fn unlink(&mut self) {
        if let Some(path) = self.path.take() {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Copies `out.len()` bytes from `offset` (a row of one environment).
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        assert!(
            offset + out.len() <= self.layout.size,
            "shm read out of range"
        );
        // SAFETY: in range (checked); the bytes belong to an environment the caller
        // owns for now, which no worker writes while the rank holds its results.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(offset), out.as_mut_ptr(), out.len()) }
    }

    /// Copies `data` to `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) {
        assert!(
            offset + data.len() <= self.layout.size,
            "shm write out of range"
        );
        // SAFETY: in range (checked); the caller owns these bytes (see `read`), and the
        // mapping is writable.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(offset), data.len()) }
    }

    /// Copies `out.len()` f32 values from `offset`.
    pub fn read_f32(&self, offset: usize, out: &mut [f32]) {
        let bytes = std::mem::size_of_val(out);
        assert!(offset + bytes <= self.layout.size, "shm read out of range");
        // SAFETY: as in `read`; every bit pattern is a valid f32, and the byte copy
        // needs no alignment.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.add(offset),
                out.as_mut_ptr().cast::<u8>(),
                bytes,
            )
        }
    }

    /// Copies `data` (f32 values) to `offset`.
    pub fn write_f32(&self, offset: usize, data: &[f32]) {
        let bytes = std::mem::size_of_val(data);
        assert!(offset + bytes <= self.layout.size, "shm write out of range");
        // SAFETY: as in `write`; reading an f32 slice as bytes is always valid.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr().cast::<u8>(), self.ptr.add(offset), bytes)
        }
    }

    pub fn byte(&self, offset: usize) -> u8 {
        let mut b = [0u8];
        self.read(offset, &mut b);
        b[0]
    }

    pub fn set_byte(&self, offset: usize, value: u8) {
        self.write(offset, &[value]);
    }

    pub fn u64_at(&self, offset: usize) -> u64 {
        let mut b = [0u8; 8];
        self.read(offset, &mut b);
        u64::from_ne_bytes(b)
    }

    pub fn f64_at(&self, offset: usize) -> f64 {
        f64::from_bits(self.u64_at(offset))
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        self.unlink();
        if !self.ptr.is_null() {
            // SAFETY: the mapping made in `create`, of this length, unmapped once; no
            // reference into it outlives `self` (accessors copy).
            unsafe { libc::munmap(self.ptr.cast(), self.layout.size) };
        }
    }
}
