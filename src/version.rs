//! What `tandem --version` reports: this build's version, the libtorch it runs on, the collective
//! backends compiled in, and whether CUDA is usable on this machine.

use crate::dist;

pub fn report() -> String {
    let cuda = if tch::Cuda::is_available() {
        format!("yes ({} device(s))", tch::Cuda::device_count())
    } else if dist::compiled_backends().contains(&"nccl") {
        "no (built with CUDA support, but no usable GPU found)".to_string()
    } else {
        "no (built without the `cuda` feature)".to_string()
    };
    format!(
        "tandem {}\nlibtorch {}\ncollective backends: {}\ncuda usable: {}\n",
        env!("CARGO_PKG_VERSION"),
        dist::libtorch_version(),
        dist::compiled_backends().join(", "),
        cuda
    )
}
