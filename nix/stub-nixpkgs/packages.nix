# The stub package set. Every derivation's builder fails on purpose: these exist to be
# evaluated and instantiated, never built. Argument checks mirror what the real functions need,
# so a flake that would fail against nixpkgs for a missing argument fails here too.
{ system }:
let
  # What a real build would need to know, with the attributes `derivation` cannot take
  # (attribute sets, functions) kept on the result instead of in the environment.
  stubDerivation =
    attrs:
    let
      name = attrs.name or "${attrs.pname}-${attrs.version}";
      passthru = {
        meta = attrs.meta or { };
      };
      environment = removeAttrs attrs [
        "meta"
        "passthru"
        "cargoLock"
        "name"
      ];
    in
    derivation (
      environment
      // {
        inherit name system;
        builder = "/bin/sh";
        args = [
          "-c"
          "echo 'stub nixpkgs: ${name} is for evaluation only' >&2; exit 1"
        ];
      }
    )
    // passthru;

  requireAttrs =
    what: names: attrs:
    let
      missing = builtins.filter (name: !(attrs ? ${name})) names;
    in
    if missing == [ ] then
      attrs
    else
      throw "stub nixpkgs: ${what} is missing ${builtins.concatStringsSep ", " missing}";

  tool = name: version: stubDerivation { inherit name version; };

  stdenv = {
    mkDerivation = attrs: stubDerivation (requireAttrs "stdenv.mkDerivation" [ "pname" "version" ] attrs);
    cc.cc.lib = tool "gcc-lib" "15";
  };

  # A fixed-output derivation like the real fetchurl: instantiating it checks the sha256's form.
  fetchurl =
    args:
    let
      checked = requireAttrs "fetchurl" [ "url" "sha256" ] args;
    in
    derivation {
      name = checked.name or (baseNameOf checked.url);
      inherit system;
      inherit (checked) url;
      builder = "/bin/sh";
      args = [
        "-c"
        "exit 1"
      ];
      outputHashMode = "flat";
      outputHashAlgo = "sha256";
      outputHash = checked.sha256;
    };

  rustc = tool "rustc" "1.95.0";
in
{
  inherit stdenv fetchurl rustc;
  cargo = tool "cargo" "1.95.0";
  clippy = tool "clippy" "1.95.0";
  rustfmt = tool "rustfmt" "1.95.0";
  cmake = tool "cmake" "4.1.2";
  zlib = tool "zlib" "1.3.1";
  unzip = tool "unzip" "6.0";
  dpkg = tool "dpkg" "1.22.21";
  python3 = tool "python3" "3.13.9";
  autoPatchelfHook = tool "auto-patchelf-hook" "0";

  rustPlatform.buildRustPackage =
    attrs:
    let
      checked = requireAttrs "rustPlatform.buildRustPackage" [ "pname" "version" "src" "cargoLock" ] attrs;
      # The real one reads the lock file at evaluation time to vendor every crate.
      lock = builtins.fromTOML (builtins.readFile checked.cargoLock.lockFile);
    in
    if lock ? package then
      stubDerivation checked
    else
      throw "stub nixpkgs: ${toString checked.cargoLock.lockFile} lists no packages";

  mkShell =
    attrs:
    stubDerivation (
      {
        name = "nix-shell";
        version = "0";
      }
      // attrs
    );

  # Like the real one, a derivation whose output is the executable script itself.
  writeShellScript =
    name: text:
    stubDerivation {
      inherit name text;
      executable = true;
    };

  runCommand =
    name: environment: script:
    stubDerivation (
      environment
      // {
        inherit name;
        buildCommand = script;
      }
    );
}
