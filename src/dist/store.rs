//! The TCPStore that rank 0 hosts behind the job's door ([`Store`]), and the shim's error
//! plumbing that every c10d call shares ([`check`], [`take_error`], [`cstring`]): c10d's own
//! timeouts are not always honoured (a client connecting to a foreign program on the store port
//! waits forever), so store and group creation run under a deadline of our own
//! ([`with_deadline`]).

use std::ffi::{CStr, CString, c_char, c_int};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::DistError;
use super::ffi;
use super::relay::JobSecret;

type Result<T> = std::result::Result<T, DistError>;

/// Takes the message a shim call left in `err` (if any) and frees it.
pub(super) fn take_error(err: *mut c_char, context: &str) -> DistError {
    let message = if err.is_null() {
        "no message from c10d".to_string()
    } else {
        // SAFETY: a non-null `err` after a failed shim call is the shim's malloc'ed,
        // NUL-terminated message, owned by us from then on and not yet freed.
        let text = unsafe { CStr::from_ptr(err) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: `err` came from the shim's malloc and is freed exactly once, here, after the
        // last read of it (the text was copied out above).
        unsafe { ffi::tdc_free(err.cast()) };
        text
    };
    DistError::C10d {
        context: context.to_string(),
        message,
    }
}

pub(super) fn check(rc: c_int, err: *mut c_char, context: &str) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(take_error(err, context))
    }
}

pub(super) fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| DistError::Invalid(format!("{what} contains a NUL byte: {s:?}")))
}

/// Raw pointers that are moved into a deadline thread. c10d's store and groups are thread-safe
/// for the calls we make on them.
pub(super) struct SendPtr<T>(pub(super) *mut T);
// SAFETY: a SendPtr only carries a TdcStore or TdcGroup pointer between threads. The C++ objects
// behind them are not tied to the thread that made them (TCPStore locks its socket, a process
// group's creation and use need no particular thread), and whoever receives the pointer is
// the only one to use it in that call: the store's owner keeps it alive meanwhile (see
// `create_group`), and a freshly created object is handed back to the thread that will own it.
unsafe impl<T> Send for SendPtr<T> {}

/// Runs `f` on its own thread and gives up after `timeout`. On timeout the thread is left
/// behind (a blocked C++ call cannot be cancelled); the caller is expected to fail the rank,
/// which ends the process and with it the thread.
pub fn with_deadline<T: Send + 'static>(
    what: &str,
    timeout: Duration,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(format!("tandem-deadline: {what}"))
        .spawn(move || {
            let _ = tx.send(f());
        })
        .map_err(|e| DistError::Invalid(format!("could not start a thread for {what}: {e}")))?;
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(DistError::Timeout {
            what: what.to_string(),
            after: timeout,
            missing: Vec::new(),
        }),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(DistError::Invalid(format!(
            "the thread doing {what} ended without an answer"
        ))),
    }
}

/// A c10d TCPStore: a small key-value service hosted by rank 0, used for the rendezvous, by the
/// process groups to exchange addresses, and for small control values. Rank 0's store listens on
/// loopback only; ranks reach it through the authenticating door of [`super::relay`].
pub struct Store {
    /// Read by `super::group` to create a process group over this store.
    pub(super) raw: *mut ffi::TdcStore,
    host: String,
    port: u16,
    secret: JobSecret,
    /// Rank 0: the store's own loopback port (and the door in front of it, closed on drop).
    hosted: Option<(u16, super::relay::Door)>,
}

// SAFETY: `raw` is owned by this Store alone (freed once, in Drop) and the C++ TCPStore behind it
// may be used and destroyed from any thread.
unsafe impl Send for Store {}
// SAFETY: every method takes `&self` and calls TCPStore's set/get/check/add, which serialise on
// the client's own mutex, so concurrent calls from several threads are sound.
unsafe impl Sync for Store {}

impl Store {
    /// Hosts the store (rank 0) behind a door on `addr:port`, that address only; `port` 0 lets
    /// the OS pick one ([`Store::port`] tells which). Only connections that prove they hold
    /// `secret` reach the store.
    pub fn host(addr: &str, port: u16, secret: &JobSecret, timeout: Duration) -> Result<Store> {
        let what = format!("hosting the rendezvous store on {addr}:{port}");
        let fail = |e: std::io::Error| DistError::C10d {
            context: what.clone(),
            message: e.to_string(),
        };
        let public = super::relay::bind(addr, port).map_err(fail)?;
        let bound = public.local_addr().map_err(fail)?.port();
        let inner = std::net::TcpListener::bind("127.0.0.1:0").map_err(fail)?;
        let inner_port = inner.local_addr().map_err(fail)?.port();
        // c10d takes the listening socket over (and closes it).
        let fd = std::os::fd::IntoRawFd::into_raw_fd(inner);
        let raw = Self::create_raw("127.0.0.1", inner_port, Some(fd), &what, timeout)?;
        let door = super::relay::Door::open(public, inner_port, secret.clone()).map_err(fail)?;
        Ok(Store {
            raw,
            host: addr.to_string(),
            port: bound,
            secret: secret.clone(),
            hosted: Some((inner_port, door)),
        })
    }

    /// Connects to the store that rank 0 hosts, retrying until `timeout`, and proves this rank
    /// holds `secret`.
    pub fn connect(addr: &str, port: u16, secret: &JobSecret, timeout: Duration) -> Result<Store> {
        let deadline = Instant::now() + timeout;
        let upstream = super::relay::connect(addr, port, secret, deadline)?;
        let what = format!("connecting to the rendezvous store at {addr}:{port}");
        let local = super::relay::local_end(upstream, timeout).map_err(|e| DistError::C10d {
            context: what.clone(),
            message: e.to_string(),
        })?;
        let remaining = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        let raw = Self::create_raw("127.0.0.1", local, None, &what, remaining)?;
        Ok(Store {
            raw,
            host: addr.to_string(),
            port,
            secret: secret.clone(),
            hosted: None,
        })
    }

    /// A second, independent client of the same store (its own connection).
    pub(super) fn another_client(&self, timeout: Duration) -> Result<Store> {
        match &self.hosted {
            Some((inner_port, _)) => {
                let what = format!("connecting to the rendezvous store at {}", self.address());
                let raw = Self::create_raw("127.0.0.1", *inner_port, None, &what, timeout)?;
                Ok(Store {
                    raw,
                    host: self.host.clone(),
                    port: self.port,
                    secret: self.secret.clone(),
                    hosted: None,
                })
            }
            None => Store::connect(&self.host, self.port, &self.secret, timeout),
        }
    }

    fn create_raw(
        addr: &str,
        port: u16,
        listen_fd: Option<c_int>,
        what: &str,
        timeout: Duration,
    ) -> Result<*mut ffi::TdcStore> {
        let host = cstring(addr, "the store address")?;
        let server = listen_fd.is_some();
        let fd = listen_fd.unwrap_or(-1);
        let timeout_ms = timeout.as_millis() as i64;
        let context = what.to_string();
        // A little beyond c10d's own timeout, so its clearer message wins when it does fire.
        let raw = with_deadline(what, timeout + Duration::from_secs(1), move || {
            let mut out = std::ptr::null_mut();
            let mut bound = 0u16;
            let mut err = std::ptr::null_mut();
            // SAFETY: `host` is a NUL-terminated string owned by this closure for the whole
            // call; `out`, `bound` and `err` are valid out-pointers on this stack frame; `fd`
            // is -1 or a listening socket nobody else owns (c10d takes it over). The store
            // pointer written to `out` on success is owned by the Store built from it.
            let rc = unsafe {
                ffi::tdc_store_create(
                    host.as_ptr(),
                    port,
                    server as c_int,
                    timeout_ms,
                    fd,
                    &mut out,
                    &mut bound,
                    &mut err,
                )
            };
            check(rc, err, &context)?;
            Ok(SendPtr(out))
        })?;
        Ok(raw.0)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Sets `key`; when this returns, every rank's next read sees the value.
    pub fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let k = cstring(key, "a store key")?;
        let mut err = std::ptr::null_mut();
        // SAFETY: `self.raw` is the live store this Store owns; `k` is NUL-terminated and
        // `value` a slice of `value.len()` bytes, both borrowed for the call, which copies them.
        let rc = unsafe {
            ffi::tdc_store_set(self.raw, k.as_ptr(), value.as_ptr(), value.len(), &mut err)
        };
        check(rc, err, &format!("setting store key {key:?}"))?;
        // TCPStore's SET gets no reply, so another rank's read could overtake it. A request that
        // does get a reply, on the same connection, returns only after the server applied it.
        let mut present: c_int = 0;
        let mut err = std::ptr::null_mut();
        // SAFETY: live owned store, NUL-terminated key alive for the call, valid out-pointers.
        let rc = unsafe { ffi::tdc_store_check(self.raw, k.as_ptr(), &mut present, &mut err) };
        check(rc, err, &format!("confirming store key {key:?}"))
    }
    /// The value of `key` if some rank has set it, without waiting.
    pub fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let k = cstring(key, "a store key")?;
        let mut data = std::ptr::null_mut();
        let mut len = 0usize;
        let mut found: c_int = 0;
        let mut err = std::ptr::null_mut();
        // SAFETY: live owned store, NUL-terminated key alive for the call; `data`, `len`,
        // `found` and `err` are valid out-pointers on this frame.
        let rc = unsafe {
            ffi::tdc_store_try_get(
                self.raw,
                k.as_ptr(),
                &mut data,
                &mut len,
                &mut found,
                &mut err,
            )
        };
        check(rc, err, &format!("reading store key {key:?}"))?;
        if found == 0 {
            return Ok(None);
        }
        // SAFETY: with `found` set, the shim malloc'ed `data` with at least `len` initialised
        // bytes (never null: it allocates one byte for an empty value); it is copied out here.
        let value = unsafe { std::slice::from_raw_parts(data, len) }.to_vec();
        // SAFETY: `data` is the shim's malloc'ed buffer, freed once, after the copy above.
        unsafe { ffi::tdc_free(data.cast()) };
        Ok(Some(value))
    }

    /// Waits until every key is set, polling, and fails at `timeout` naming the missing ones.
    pub fn wait_all(&self, keys: &[String], timeout: Duration, what: &str) -> Result<Vec<Vec<u8>>> {
        let start = Instant::now();
        let mut values: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        let mut pause = Duration::from_millis(2);
        loop {
            for (key, slot) in keys.iter().zip(values.iter_mut()) {
                if slot.is_none() {
                    *slot = self.try_get(key)?;
                }
            }
            if values.iter().all(Option::is_some) {
                return Ok(values.into_iter().map(Option::unwrap).collect());
            }
            if start.elapsed() >= timeout {
                let missing = keys
                    .iter()
                    .zip(&values)
                    .filter(|(_, v)| v.is_none())
                    .map(|(k, _)| k.clone())
                    .collect();
                return Err(DistError::Timeout {
                    what: what.to_string(),
                    after: timeout,
                    missing,
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// Atomically adds `delta` to the integer at `key` and returns the new value.
    pub fn add(&self, key: &str, delta: i64) -> Result<i64> {
        let k = cstring(key, "a store key")?;
        let mut out = 0i64;
        let mut err = std::ptr::null_mut();
        // SAFETY: live owned store, NUL-terminated key alive for the call, valid out-pointers.
        let rc = unsafe { ffi::tdc_store_add(self.raw, k.as_ptr(), delta, &mut out, &mut err) };
        check(rc, err, &format!("adding to store key {key:?}"))?;
        Ok(out)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: `raw` came from a successful tdc_store_create and is freed exactly once; no
        // other owner exists (groups keep the store through an Arc of this Store, so it is not
        // dropped while one still uses it).
        unsafe { ffi::tdc_store_free(self.raw) };
    }
}
