# tandem itself: the workspace built with nixpkgs' rustPlatform against the pinned libtorch, the
# pinned ALE source and the gloo headers. With runTests = true the build also runs the whole
# workspace test suite (`cargo test --workspace --release`), which is what checks.tests is.
{
  rustPlatform,
  cmake,
  zlib,
  libtorch,
  aleSource,
  glooHeaders,
  # The source without target/ and .deps/, and its Cargo.toml and Cargo.lock as paths of the
  # flake itself (read while evaluating).
  src,
  cargoToml,
  cargoLock,
  runTests ? false,
}:
let
  manifest = builtins.fromTOML (builtins.readFile cargoToml);
in
rustPlatform.buildRustPackage {
  pname = if runTests then "tandem-tests" else "tandem";
  inherit (manifest.workspace.package) version;
  inherit src;
  cargoLock.lockFile = cargoLock;

  # cmake builds ALE from crates/tandem-ale's build script, not as this derivation's build system.
  nativeBuildInputs = [ cmake ];
  dontUseCmakeConfigure = true;
  buildInputs = [ zlib ];

  # What scripts/setup provides on Debian, by the variables the build scripts already honour
  # (an LIBTORCH in the environment wins over .cargo/config.toml's project-local one).
  LIBTORCH = "${libtorch}";
  TANDEM_ALE_SRC = "${aleSource}";
  GLOO_INCLUDE_DIR = "${glooHeaders}/include";

  doCheck = runTests;
  cargoTestFlags = [ "--workspace" ];
  preCheck = ''
    export HOME="$TMPDIR"
    export TORCH_CPP_LOG_LEVEL=ERROR
  '';

  meta = {
    description = manifest.package.description;
    mainProgram = "tandem";
    # tandem is MIT OR Apache-2.0, but this build links ALE (GPL-2.0) statically.
    license = "GPL-2.0-only";
    platforms = [ "x86_64-linux" ];
  };
}
