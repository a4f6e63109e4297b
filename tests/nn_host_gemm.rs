//! The host passes' matrix product (`tandem::nn::host_gemm`): oneMKL's `sgemm_` is found in the
//! loaded libtorch on x86-64, and on every layout the host MLP uses (plain, the weight gradient's
//! transposed input, the input gradient's transposed weight) and on edge shapes both paths equal
//! a float64 product; a product's bits do not depend on where its operands lie in memory, so a
//! run's rounding cannot change with its buffers' addresses; and `beta` 0 overwrites C.

use tandem::nn::host_gemm::{GemmPath, gemm_acc_on, gemm_path};

const PATHS: [GemmPath; 2] = [GemmPath::Mkl, GemmPath::MatrixMultiply];

/// Deterministic values in [-1, 1) (a 64-bit LCG's high bits).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// One product as the host MLP asks for it: shape `(m, k, n)`, A and B with their strides.
struct Product {
    shape: (usize, usize, usize),
    a: Vec<f32>,
    a_strides: (usize, usize),
    b: Vec<f32>,
    b_strides: (usize, usize),
}

impl Product {
    /// A `[m, k]` row-major, or stored as its transpose `[k, m]` when `a_transposed`; B likewise.
    fn new(
        shape: (usize, usize, usize),
        a_transposed: bool,
        b_transposed: bool,
        seed: u64,
    ) -> Self {
        let (m, k, n) = shape;
        let a_strides = if a_transposed { (1, m) } else { (k, 1) };
        let b_strides = if b_transposed { (1, k) } else { (n, 1) };
        Product {
            shape,
            a: values(m * k, seed),
            a_strides,
            b: values(k * n, seed + 1),
            b_strides,
        }
    }

    fn reference(&self, c0: &[f32], beta: f32) -> Vec<f64> {
        let (m, k, n) = self.shape;
        let at = |i: usize, j: usize| self.a[i * self.a_strides.0 + j * self.a_strides.1] as f64;
        let bt = |i: usize, j: usize| self.b[i * self.b_strides.0 + j * self.b_strides.1] as f64;
        (0..m * n)
            .map(|ij| {
                let (i, j) = (ij / n, ij % n);
                let sum: f64 = (0..k).map(|l| at(i, l) * bt(l, j)).sum();
                sum + beta as f64 * c0[ij] as f64
            })
            .collect()
    }

    /// The product on `path` with A, B and C copied to `offset` floats into fresh buffers.
    fn run(&self, path: GemmPath, c0: &[f32], beta: f32, offset: usize) -> Vec<f32> {
        let shifted = |x: &[f32]| {
            let mut v = vec![0.0f32; offset];
            v.extend_from_slice(x);
            v
        };
        let (a, b, mut c) = (shifted(&self.a), shifted(&self.b), shifted(c0));
        gemm_acc_on(
            path,
            self.shape,
            &a[offset..],
            self.a_strides,
            &b[offset..],
            self.b_strides,
            &mut c[offset..],
            beta,
        );
        c.split_off(offset)
    }
}

/// The host MLP's products for a layer of `k` inputs and `w` outputs over `rows` rows: the
/// forward pass, the weight gradient (inputᵀ g) and the input gradient (g Wᵀ).
fn layer_products(rows: usize, k: usize, w: usize, seed: u64) -> Vec<Product> {
    vec![
        Product::new((rows, k, w), false, false, seed),
        Product::new((k, rows, w), true, false, seed + 10),
        Product::new((rows, w, k), false, true, seed + 20),
    ]
}

/// Every product of these tests, on one compute thread as the host passes run.
fn all_products() -> Vec<Product> {
    tch::set_num_threads(1);
    let mut products = Vec::new();
    for (i, &(rows, k, w)) in [
        (256, 4, 64),
        (256, 64, 64),
        (256, 64, 2),
        (64, 64, 1),
        (8, 3, 64),
        (1, 64, 64),
        (1, 4, 1),
        (37, 5, 7),
        (129, 17, 33),
    ]
    .iter()
    .enumerate()
    {
        products.extend(layer_products(rows, k, w, 100 * i as u64));
    }
    products
}

#[cfg(target_arch = "x86_64")]
#[test]
fn libtorch_on_x86_64_gives_the_host_passes_mkl() {
    assert_eq!(gemm_path(), GemmPath::Mkl);
}

#[test]
fn both_paths_equal_a_float64_product_on_every_layout() {
    for p in all_products() {
        let (m, _, n) = p.shape;
        let c0 = values(m * n, 7);
        for beta in [0.0f32, 1.0] {
            let want = p.reference(&c0, beta);
            for path in PATHS {
                let got = p.run(path, &c0, beta, 0);
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (*g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
                        "{path:?} {:?} strides {:?} {:?} beta {beta}: {g} against {w}",
                        p.shape,
                        p.a_strides,
                        p.b_strides
                    );
                }
            }
        }
    }
}

#[test]
fn a_products_bits_do_not_depend_on_where_its_operands_lie() {
    for p in all_products() {
        let (m, _, n) = p.shape;
        let c0 = values(m * n, 11);
        for path in PATHS {
            let at_zero = p.run(path, &c0, 1.0, 0);
            for offset in 1..16 {
                let moved = p.run(path, &c0, 1.0, offset);
                assert!(
                    moved
                        .iter()
                        .zip(&at_zero)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{path:?} {:?} strides {:?} {:?}: operands {offset} floats further on round \
                     otherwise",
                    p.shape,
                    p.a_strides,
                    p.b_strides
                );
            }
        }
    }
}

#[test]
fn beta_zero_overwrites_what_c_held() {
    for p in all_products() {
        let (m, _, n) = p.shape;
        let garbage = vec![f32::NAN; m * n];
        let want = p.reference(&vec![0.0; m * n], 0.0);
        for path in PATHS {
            let got = p.run(path, &garbage, 0.0, 0);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(g, w)| (*g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs())),
                "{path:?} {:?}: C's old values leaked into a beta-0 product",
                p.shape
            );
        }
    }
}
