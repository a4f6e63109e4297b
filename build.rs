//! Compiles tandem's C++ (csrc/: the c10d shim, and the libtorch operations tch lacks) against the
//! very libtorch that torch-sys found, and gives tandem's binaries an rpath to it so they run
//! without LD_LIBRARY_PATH.
use std::env;
use std::path::PathBuf;

fn main() {
    for file in [
        "csrc/c10d_shim.cpp",
        "csrc/torch_ops.cpp",
        "csrc/ffi_guard.hpp",
    ] {
        println!("cargo:rerun-if-changed={file}");
    }
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    println!("cargo:rerun-if-env-changed=NCCL_INCLUDE_DIR");
    // torch-sys declares `links = "tch"` and exports its lib dir as `libtorch_lib`.
    let lib = PathBuf::from(env::var("DEP_TCH_LIBTORCH_LIB").expect(
        "torch-sys did not report a libtorch lib dir (DEP_TCH_LIBTORCH_LIB); run scripts/setup first",
    ));
    let include = lib
        .parent()
        .expect("libtorch lib dir has a parent")
        .join("include");
    if !include
        .join("torch/csrc/distributed/c10d/ProcessGroupGloo.hpp")
        .exists()
    {
        panic!(
            "libtorch at {} has no c10d headers (include/torch/csrc/distributed/c10d); \
             use the libtorch that scripts/setup installs, or a full torch build",
            include.display()
        );
    }
    if !PathBuf::from("/usr/include/gloo/allreduce.h").exists()
        && env::var_os("GLOO_INCLUDE_DIR").is_none()
    {
        panic!(
            "gloo headers not found (/usr/include/gloo); run scripts/setup, which installs libgloo-dev"
        );
    }

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .pic(true)
        .std("c++20")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .define("USE_C10D_GLOO", None)
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .define("GLOG_USE_GLOG_EXPORT", None)
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations")
        .file("csrc/c10d_shim.cpp")
        .file("csrc/torch_ops.cpp");
    if let Some(dir) = env::var_os("GLOO_INCLUDE_DIR") {
        build.include(dir);
    }

    let cuda = env::var_os("CARGO_FEATURE_CUDA").is_some();
    if cuda {
        let cuda_home = env::var("CUDA_HOME").unwrap_or_else(|_| "/usr/local/cuda".into());
        build
            .define("USE_C10D_NCCL", None)
            .include(PathBuf::from(&cuda_home).join("include"));
        if let Ok(nccl) = env::var("NCCL_INCLUDE_DIR") {
            build.include(nccl);
        }
        // tch's CPU-only link order lets --as-needed drop libtorch_cuda; the NCCL group and
        // CUDA tensors need it loaded, so force it. The shim's c10::cuda calls (current and
        // set device) live in libc10_cuda.
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch_cuda");
        println!("cargo:rustc-link-arg=-lc10_cuda");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
    build.compile("tandem_csrc");

    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    // In the dynamic symbol table, so libtorch's oneMKL binds to tandem's answer
    // (src/torch_ops.rs, `mkl_serv_intel_cpu_true`). GNU ld exports it anyway, libtorch_cpu
    // defining the same name; the flag says so and holds for a linker that would not.
    println!("cargo:rustc-link-arg=-Wl,--export-dynamic-symbol=mkl_serv_intel_cpu_true");
    println!("cargo:rustc-env=TANDEM_LIBTORCH_LIB={}", lib.display());
}
