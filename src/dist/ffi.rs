//! Raw declarations of the C ABI in `csrc/c10d_shim.cpp`. Nothing outside `dist` uses these:
//! `dist::group` wraps them in safe types.
//!
//! Every fallible function returns 0 on success and 1 on failure, with a malloc'ed message in
//! `err` that must be released with `tdc_free`.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

use torch_sys::C_tensor;

#[repr(C)]
pub struct TdcStore {
    _private: [u8; 0],
}

#[repr(C)]
pub struct TdcGroup {
    _private: [u8; 0],
}

/// An all-reduce started and not yet waited for (`tdc_allreduce_start`).
#[repr(C)]
pub struct TdcWork {
    _private: [u8; 0],
}

#[repr(C)]
pub struct TdcReducer {
    _private: [u8; 0],
}

unsafe extern "C" {
    pub fn tdc_free(p: *mut c_void);
    pub fn tdc_torch_version() -> *const c_char;
    pub fn tdc_nccl_compiled() -> c_int;
    pub fn tdc_set_cuda_device(index: c_int, err: *mut *mut c_char) -> c_int;
    pub fn tdc_current_cuda_device(out: *mut c_int, err: *mut *mut c_char) -> c_int;

    pub fn tdc_store_create(
        host: *const c_char,
        port: u16,
        is_server: c_int,
        timeout_ms: i64,
        listen_fd: c_int,
        out: *mut *mut TdcStore,
        bound_port: *mut u16,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_store_free(store: *mut TdcStore);
    pub fn tdc_store_set(
        store: *mut TdcStore,
        key: *const c_char,
        data: *const u8,
        len: usize,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_store_try_get(
        store: *mut TdcStore,
        key: *const c_char,
        data: *mut *mut u8,
        len: *mut usize,
        found: *mut c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_store_check(
        store: *mut TdcStore,
        key: *const c_char,
        present: *mut c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_store_add(
        store: *mut TdcStore,
        key: *const c_char,
        delta: i64,
        result: *mut i64,
        err: *mut *mut c_char,
    ) -> c_int;

    pub fn tdc_group_create_gloo(
        store: *mut TdcStore,
        prefix: *const c_char,
        rank: c_int,
        size: c_int,
        timeout_ms: i64,
        interface_host: *const c_char,
        interfaces: *const c_char,
        threads: c_int,
        out: *mut *mut TdcGroup,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_group_create_nccl(
        store: *mut TdcStore,
        prefix: *const c_char,
        rank: c_int,
        size: c_int,
        timeout_ms: i64,
        out: *mut *mut TdcGroup,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_group_free(group: *mut TdcGroup);
    pub fn tdc_allreduce_start(
        group: *mut TdcGroup,
        tensor: *mut C_tensor,
        op: c_int,
        out: *mut *mut TdcWork,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_work_wait(work: *mut TdcWork, err: *mut *mut c_char) -> c_int;
    pub fn tdc_work_free(work: *mut TdcWork);

    pub fn tdc_allreduce(
        group: *mut TdcGroup,
        tensors: *mut *mut C_tensor,
        n: usize,
        op: c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_broadcast(
        group: *mut TdcGroup,
        tensor: *mut C_tensor,
        root: c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_reduce(
        group: *mut TdcGroup,
        tensor: *mut C_tensor,
        root: c_int,
        op: c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_allgather(
        group: *mut TdcGroup,
        outputs: *mut *mut C_tensor,
        world: usize,
        input: *mut C_tensor,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_barrier(group: *mut TdcGroup, err: *mut *mut c_char) -> c_int;

    #[allow(clippy::too_many_arguments)]
    pub fn tdc_reducer_create(
        group: *mut TdcGroup,
        params: *mut *mut C_tensor,
        slots: *mut *mut C_tensor,
        n: usize,
        bucket_sizes: *const usize,
        flats: *mut *mut C_tensor,
        n_buckets: usize,
        bf16: c_int,
        out: *mut *mut TdcReducer,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_reducer_arm(reducer: *mut TdcReducer, err: *mut *mut c_char) -> c_int;
    pub fn tdc_reducer_finish(
        reducer: *mut TdcReducer,
        params: *mut *mut C_tensor,
        n: usize,
        world: c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn tdc_reducer_free(reducer: *mut TdcReducer);
}
