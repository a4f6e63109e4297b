//! The libtorch operations tch lacks (`tandem::torch_ops`): what they do, and that libtorch's
//! own errors come back as `Err` with its message instead of a C++ exception crossing into Rust.

use tandem::torch_ops::{fused_adam, set_grad};
use tch::{Device, Kind, Tensor};

fn floats(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(t.flatten(0, -1)).unwrap()
}

#[test]
fn set_grad_makes_backward_accumulate_into_the_given_buffer() {
    let p = Tensor::zeros([3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let buffer = Tensor::from_slice(&[1.0f32, 1.0, 1.0]);
    set_grad(&p, &buffer).unwrap();
    (&p * Tensor::from_slice(&[1.0f32, 2.0, 3.0]))
        .sum(Kind::Float)
        .backward();
    assert_eq!(floats(&buffer), vec![2.0, 3.0, 4.0]);
    assert_eq!(p.grad().data_ptr(), buffer.data_ptr());
}

#[test]
fn fused_adam_on_a_gradient_of_another_dtype_is_an_error_with_libtorchs_message() {
    let f = |kind: Kind| Tensor::zeros([4], (kind, Device::Cpu));
    let step = Tensor::from_slice(&[1.0f32]).reshape([] as [i64; 0]);
    let err = fused_adam(
        &f(Kind::Float),
        &f(Kind::Double),
        &f(Kind::Float),
        &f(Kind::Float),
        &step,
        1e-3,
        (0.9, 0.999, 1e-8),
    )
    .unwrap_err()
    .to_string();
    // libtorch's own words, without the C++ backtrace.
    assert_eq!(
        err,
        "the fused Adam step failed: expected scalar type Float but found Double"
    );
}

#[test]
fn storage_offset_counts_elements_into_the_storage() {
    let base = Tensor::arange(10, (Kind::Float, Device::Cpu));
    assert_eq!(tandem::torch_ops::storage_offset(&base), 0);
    let view = base.narrow(0, 3, 4);
    assert_eq!(tandem::torch_ops::storage_offset(&view), 3);
    assert_eq!(tandem::torch_ops::storage_offset(&view.narrow(0, 2, 1)), 5);
}
