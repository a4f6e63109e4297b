//! Builds ALE 0.12.1's C++ library with CMake from the source that
//! `scripts/setup-ale` unpacks, compiles the C shim against it, and embeds the
//! game ROMs shipped in the same source so binaries need no files at run time.
//!
//! The CMake build lives in one folder per target directory
//! (`<target>/tandem-ale-cmake`), shared by every cargo profile: ALE is always
//! compiled with the same optimised flags, so `cargo test` and `cargo bench`
//! do not each pay for the multi-minute build, and an unchanged build is a
//! no-op `make`.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, exit};

const ALE_VERSION: &str = "0.12.1";
/// What `scripts/setup-ale` writes once the sdist's sha256 checked out.
const VERIFIED_MARKER: &str = ".tandem-verified";
const SDIST_SHA256: &str = "c503d574c5983e1063b451201ccb779d935919c0f6bf116fb0f4f8aa4c86d249";
/// Bumped whenever the CMake options below change, so an old cache is not reused.
const CMAKE_CONFIG_KEY: &str = "tandem-ale-cmake-v1";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=csrc/shim.cpp");
    println!("cargo:rerun-if-env-changed=TANDEM_ALE_SRC");
    println!("cargo:rerun-if-env-changed=TANDEM_ALE_BUILD_DIR");
    println!("cargo:rerun-if-env-changed=CXX");

    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let source = ale_source_dir(&manifest_dir);
    println!(
        "cargo:rerun-if-changed={}",
        source.join(VERIFIED_MARKER).display()
    );

    let build_dir = cmake_build_dir(&out_dir);
    let library_dir = build_ale(&source, &build_dir);
    compile_shim(&manifest_dir, &source, &build_dir);
    println!("cargo:rustc-link-search=native={}", library_dir.display());
    println!("cargo:rustc-link-lib=static=ale");
    // ALE uses zlib (its PNG screen export, gzip'd ROM files). TANDEM_ALE_STATIC_ZLIB=PATH
    // links that libz.a instead, for a binary that travels to machines whose libz this build
    // never saw (scripts/device-build).
    println!("cargo:rerun-if-env-changed=TANDEM_ALE_STATIC_ZLIB");
    if let Some(archive) = env::var_os("TANDEM_ALE_STATIC_ZLIB").map(PathBuf::from) {
        if archive.file_name().is_none_or(|n| n != "libz.a") || !archive.is_file() {
            fail(&format!(
                "TANDEM_ALE_STATIC_ZLIB={} is not a libz.a file",
                archive.display()
            ));
        }
        let dir = archive.parent().expect("a file has a parent folder");
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=static=z");
    } else {
        println!("cargo:rustc-link-lib=dylib=z");
    }
    println!("cargo:rustc-link-lib=dylib=stdc++");
    embed_roms(&source, &out_dir);
}

fn fail(message: &str) -> ! {
    eprintln!("\nerror: tandem-ale: {message}\n");
    exit(1);
}

fn ale_source_dir(manifest_dir: &Path) -> PathBuf {
    let (source, origin) = match env::var_os("TANDEM_ALE_SRC") {
        Some(path) => (PathBuf::from(path), "TANDEM_ALE_SRC"),
        None => (
            manifest_dir
                .join("../../.deps")
                .join(format!("ale-py-{ALE_VERSION}")),
            "the default location",
        ),
    };
    let marker = source.join(VERIFIED_MARKER);
    match fs::read_to_string(&marker) {
        Ok(content) if content.trim() == SDIST_SHA256 => {}
        Ok(_) => fail(&format!(
            "{} (from {origin}) holds a different ALE source than the pinned ale-py {ALE_VERSION} sdist; \
             remove it and run scripts/setup-ale (or scripts/setup)",
            source.display()
        )),
        Err(_) => fail(&format!(
            "the ALE {ALE_VERSION} source is missing: expected the unpacked ale-py sdist in {} (from {origin}). \
             Run scripts/setup-ale (or scripts/setup) from the repository root, or set TANDEM_ALE_SRC \
             to a folder it prepared.",
            source.display()
        )),
    }
    source.canonicalize().unwrap_or(source)
}

/// `<target>/tandem-ale-cmake`, found from OUT_DIR (`<target>/[<triple>/]<profile>/build/<pkg>-<hash>/out`).
fn cmake_build_dir(out_dir: &Path) -> PathBuf {
    if let Some(dir) = env::var_os("TANDEM_ALE_BUILD_DIR") {
        return PathBuf::from(dir);
    }
    let profile_dir = out_dir.ancestors().nth(3);
    let is_cargo_layout =
        out_dir.ancestors().nth(2).and_then(Path::file_name) == Some("build".as_ref());
    match (is_cargo_layout, profile_dir.and_then(Path::parent)) {
        (true, Some(target_dir)) => target_dir.join("tandem-ale-cmake"),
        _ => out_dir.join("ale-cmake"),
    }
}

fn run(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|error| fail(&format!("{what}: could not run {:?}: {error}. Is cmake installed? (scripts/setup-ale installs it)", command.get_program())));
    if !output.status.success() {
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stdout.lines().chain(stderr.lines()).collect();
        let tail = tail[tail.len().saturating_sub(60)..].join("\n");
        fail(&format!("{what} failed ({}):\n{tail}", output.status));
    }
}

/// Configures (once) and builds the static `libale.a`; returns its folder.
fn build_ale(source: &Path, build_dir: &Path) -> PathBuf {
    let key_file = build_dir.join("tandem-config-key");
    let key = format!(
        "{CMAKE_CONFIG_KEY} {} {}",
        source.display(),
        env::var("CXX").unwrap_or_default()
    );
    let configured = build_dir.join("CMakeCache.txt").is_file()
        && fs::read_to_string(&key_file).is_ok_and(|existing| existing == key);
    if !configured {
        let _ = fs::remove_dir_all(build_dir);
        fs::create_dir_all(build_dir).unwrap_or_else(|error| {
            fail(&format!("cannot create {}: {error}", build_dir.display()))
        });
        let mut cmake = Command::new("cmake");
        cmake
            .arg("-S")
            .arg(source)
            .arg("-B")
            .arg(build_dir)
            // RelWithDebInfo keeps ALE's CMakeLists from turning on LTO (whose
            // objects the Rust linker could not use); the flags make it an
            // optimised build without debug info, asserts off as in ale-py's Release.
            .arg("-DCMAKE_BUILD_TYPE=RelWithDebInfo")
            .arg("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O3 -DNDEBUG")
            .arg("-DCMAKE_CXX_FLAGS=-w")
            .arg("-DCMAKE_POSITION_INDEPENDENT_CODE=ON")
            .arg("-DBUILD_CPP_LIB=ON")
            .arg("-DBUILD_PYTHON_LIB=OFF")
            .arg("-DBUILD_VECTOR_LIB=OFF")
            .arg("-DBUILD_VECTOR_XLA_LIB=OFF")
            .arg("-DSDL_SUPPORT=OFF")
            .arg("-DBUILD_SHARED_LIBS=OFF");
        if let Ok(cxx) = env::var("CXX") {
            cmake.arg(format!("-DCMAKE_CXX_COMPILER={cxx}"));
        }
        run(&mut cmake, "configuring ALE with cmake");
        fs::write(&key_file, &key)
            .unwrap_or_else(|error| fail(&format!("cannot write {}: {error}", key_file.display())));
    }
    // Cargo's -j (NUM_JOBS), but never more than 2: the build machines are small and shared.
    let jobs = env::var("NUM_JOBS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, 2);
    run(
        Command::new("cmake")
            .arg("--build")
            .arg(build_dir)
            .arg("--target")
            .arg("ale-lib")
            .arg("--parallel")
            .arg(jobs.to_string()),
        "building ALE with cmake",
    );
    let library_dir = build_dir.join("src/ale");
    if !library_dir.join("libale.a").is_file() {
        fail(&format!(
            "cmake finished but {} is missing",
            library_dir.join("libale.a").display()
        ));
    }
    library_dir
}

fn compile_shim(manifest_dir: &Path, source: &Path, build_dir: &Path) {
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file(manifest_dir.join("csrc/shim.cpp"))
        .include(source.join("src"))
        // version.hpp, generated by the CMake configure step.
        .include(build_dir.join("src/ale"))
        .define("NDEBUG", None)
        .warnings(false)
        .cpp_link_stdlib(None)
        .compile("tandem_ale_shim");
}

/// Writes `roms.rs`: a sorted table of (game name, ROM bytes) for every ROM in the sdist.
fn embed_roms(source: &Path, out_dir: &Path) {
    let rom_dir = source.join("src/ale/python/roms");
    let mut roms: Vec<(String, PathBuf)> = fs::read_dir(&rom_dir)
        .unwrap_or_else(|error| {
            fail(&format!(
                "cannot list ROMs in {}: {error}",
                rom_dir.display()
            ))
        })
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "bin"))
        .filter_map(|path| Some((path.file_stem()?.to_str()?.to_owned(), path.clone())))
        .collect();
    roms.sort();
    if !roms.iter().any(|(name, _)| name == "breakout") {
        fail(&format!(
            "no breakout.bin in {}; rerun scripts/setup-ale",
            rom_dir.display()
        ));
    }
    let mut table = String::from(
        "/// (game, ROM image), sorted by game name.\npub(crate) static ROMS: &[(&str, &[u8])] = &[\n",
    );
    for (name, path) in &roms {
        writeln!(
            table,
            "    ({name:?}, include_bytes!({:?})),",
            path.display().to_string()
        )
        .expect("writing to a String");
    }
    table.push_str("];\n");
    let destination = out_dir.join("roms.rs");
    fs::write(&destination, table)
        .unwrap_or_else(|error| fail(&format!("cannot write {}: {error}", destination.display())));
}
