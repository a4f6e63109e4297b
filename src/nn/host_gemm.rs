//! The single-threaded f32 matrix product of the host passes ([`super::HostTwinMlp`]): oneMKL's
//! `sgemm_` where the loaded libtorch carries it, the `matrixmultiply` crate otherwise.
//!
//! libtorch's x86-64 builds link oneMKL in and export its Fortran BLAS entry points; MKL's
//! kernels for these small shapes are about a quarter faster than `matrixmultiply`'s
//! (docs/performance.md, "Training" 1). The symbol is looked up once at run time, not linked,
//! so a libtorch without it (another architecture, another BLAS) still runs, on the fallback.
//! On one machine the choice never changes, so a run's rounding is the same every time; MKL's
//! results do not depend on where the operands lie (tests/nn_host_gemm.rs holds it, since the
//! host buffers and the parameters' offsets are not aligned to anything in particular).

use std::ffi::c_char;
use std::sync::OnceLock;

/// The LP64 Fortran `sgemm`: C = alpha op(A) op(B) + beta C, column-major, all by reference.
type FortranSgemm = unsafe extern "C" fn(
    transa: *const c_char,
    transb: *const c_char,
    m: *const i32,
    n: *const i32,
    k: *const i32,
    alpha: *const f32,
    a: *const f32,
    lda: *const i32,
    b: *const f32,
    ldb: *const i32,
    beta: *const f32,
    c: *mut f32,
    ldc: *const i32,
);

/// Which implementation the products take in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemmPath {
    /// oneMKL's `sgemm_`, exported by the loaded libtorch.
    Mkl,
    /// The `matrixmultiply` crate.
    MatrixMultiply,
}

fn mkl_sgemm() -> Option<FortranSgemm> {
    static SGEMM: OnceLock<Option<FortranSgemm>> = OnceLock::new();
    *SGEMM.get_or_init(|| {
        // SAFETY: dlsym with RTLD_DEFAULT searches the objects already loaded (libtorch_cpu is
        // linked into this executable); the name is a NUL-terminated literal.
        let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"sgemm_".as_ptr()) };
        if symbol.is_null() {
            return None;
        }
        // SAFETY: `sgemm_` is BLAS's Fortran routine, whose LP64 signature (the interface
        // libtorch links, 32-bit integers) is `FortranSgemm`; the hidden lengths of the two
        // one-character arguments are not read by MKL's implementation.
        Some(unsafe { std::mem::transmute::<*mut libc::c_void, FortranSgemm>(symbol) })
    })
}

/// The implementation this process's products take.
pub fn gemm_path() -> GemmPath {
    match mkl_sgemm() {
        Some(_) => GemmPath::Mkl,
        None => GemmPath::MatrixMultiply,
    }
}

/// How a row-major operand X `[rows, cols]` with strides `(rs, cs)` is handed to a column-major
/// BLAS as Xᵀ: `('N', ld)` when its rows are contiguous, `('T', ld)` when its columns are; `None`
/// for any other layout. A leading dimension that is never stepped over (one row, or one column)
/// is raised to the minimum BLAS checks.
fn as_transposed(rows: usize, cols: usize, (rs, cs): (usize, usize)) -> Option<(u8, i32)> {
    let ld = |stride: usize, least: usize| i32::try_from(stride.max(least).max(1)).ok();
    if cs == 1 && (rs >= cols || rows == 1) {
        Some((b'N', ld(rs, cols)?))
    } else if rs == 1 && (cs >= rows || cols == 1) {
        Some((b'T', ld(cs, rows)?))
    } else {
        None
    }
}

/// C = A B + beta C for row-major A `[m, k]`, B `[k, n]` and contiguous C `[m, n]`, each operand
/// given with its row and column strides (a transpose is a swap of strides).
pub fn gemm_acc(
    shape: (usize, usize, usize),
    a: &[f32],
    a_strides: (usize, usize),
    b: &[f32],
    b_strides: (usize, usize),
    c: &mut [f32],
    beta: f32,
) {
    gemm_acc_on(gemm_path(), shape, a, a_strides, b, b_strides, c, beta)
}

/// [`gemm_acc`] on the given path (MKL's where this process has it, [`gemm_path`]); the tests
/// hold the two to each other.
#[allow(clippy::too_many_arguments)]
pub fn gemm_acc_on(
    path: GemmPath,
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    (rsa, csa): (usize, usize),
    b: &[f32],
    (rsb, csb): (usize, usize),
    c: &mut [f32],
    beta: f32,
) {
    let last = |rs: usize, cs: usize, rows: usize, cols: usize| {
        if rows == 0 || cols == 0 {
            0
        } else {
            (rows - 1) * rs + (cols - 1) * cs + 1
        }
    };
    assert!(
        a.len() >= last(rsa, csa, m, k) && b.len() >= last(rsb, csb, k, n) && c.len() >= m * n,
        "host MLP: a matrix product's operands are shorter than its shape"
    );
    if m == 0 || n == 0 {
        return;
    }
    let mkl = mkl_sgemm().filter(|_| path == GemmPath::Mkl);
    if let (Some(sgemm), Some((op_b, ldb)), Some((op_a, lda)), Ok(mi), Ok(ni), Ok(ki)) = (
        mkl,
        as_transposed(k, n, (rsb, csb)),
        as_transposed(m, k, (rsa, csa)),
        i32::try_from(m),
        i32::try_from(n),
        i32::try_from(k),
    ) {
        // Row-major C = A B is column-major Cᵀ = Bᵀ Aᵀ, with Cᵀ `[n, m]` and leading dimension n.
        let (op_b, op_a) = (op_b as c_char, op_a as c_char);
        let alpha = 1.0f32;
        // SAFETY: the assertion above keeps every element each operand's shape and strides
        // address inside its slice, and `as_transposed` gave leading dimensions that address
        // exactly those elements; `c` does not overlap `a` or `b` (a `&mut` slice cannot alias
        // the shared ones). Every argument is a pointer to a live local, as Fortran passes them.
        unsafe {
            sgemm(
                &op_b,
                &op_a,
                &ni,
                &mi,
                &ki,
                &alpha,
                b.as_ptr(),
                &ldb,
                a.as_ptr(),
                &lda,
                &beta,
                c.as_mut_ptr(),
                &ni,
            )
        }
        return;
    }
    // SAFETY: as above: every addressed element lies inside its slice, and `c` aliases neither
    // operand.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            rsa as isize,
            csa as isize,
            b.as_ptr(),
            rsb as isize,
            csb as isize,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        )
    }
}
