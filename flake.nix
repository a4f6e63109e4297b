# tandem as a Nix flake: the package, `nix run . -- experiments/breakout.kdl`, one app per
# experiment (`nix run .#cartpole`) and per declared sweep (`nix run .#cartpole-seeds`, see
# nix/sweeps.nix), a Nix library for writing experiments and sweeps (`lib`, nix/lib.nix), a
# development shell, and checks (the test suite; `tandem validate` over every experiment and
# every sweep variant).
#
# Only x86_64-linux: libtorch comes from the pinned manylinux torch wheel (see nix/sources.nix).
# There is no flake.lock in the repository yet: the machine this flake was written on has no
# network, so `nix flake lock` (run once on a networked machine) pins nixpkgs. tests/flake.rs
# evaluates the flake offline against nix/stub-nixpkgs; see docs/nix.md.
{
  description = "Data-parallel reinforcement learning experiments declared in KDL";

  # nixos-unstable: tandem needs Rust 1.95 (edition 2024, kdl 6.7); the check below says so
  # when a pinned nixpkgs has an older rustc.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs =
    { self, nixpkgs }:
    let
      system = "x86_64-linux";
      pkgs = nixpkgs.legacyPackages.${system};
      minimumRust = "1.95";
      rustIsRecentEnough = builtins.compareVersions pkgs.rustc.version minimumRust >= 0;
      requireRust =
        value:
        if rustIsRecentEnough then
          value
        else
          throw "tandem needs rustc >= ${minimumRust}, but this nixpkgs has rustc ${pkgs.rustc.version}; update the nixpkgs input (nix flake update)";

      sources = import ./nix/sources.nix;

      # The repository without build outputs and local downloads, so `path:` uses of this
      # flake do not copy target/ or .deps/ into the store.
      src = builtins.path {
        path = ./.;
        name = "tandem-source";
        filter =
          path: type:
          !(builtins.elem (baseNameOf path) [
            "target"
            ".deps"
            "runs"
            "result"
            ".git"
          ]);
      };

      libtorch = import ./nix/libtorch.nix {
        inherit (pkgs)
          stdenv
          fetchurl
          unzip
          autoPatchelfHook
          ;
        inherit sources;
      };
      aleSource = import ./nix/ale-source.nix {
        inherit (pkgs) stdenv fetchurl;
        inherit sources;
      };
      glooHeaders = import ./nix/gloo-headers.nix {
        inherit (pkgs) stdenv fetchurl dpkg;
        inherit sources;
      };
      buildTandem =
        runTests:
        requireRust (
          import ./nix/package.nix {
            inherit (pkgs) rustPlatform cmake zlib;
            inherit
              libtorch
              aleSource
              glooHeaders
              src
              runTests
              ;
            cargoToml = ./Cargo.toml;
            cargoLock = ./Cargo.lock;
          }
        );
      tandem = buildTandem false;

      # Every experiment directly in experiments/ (the pieces under experiments/include/ are
      # not experiments of their own).
      experimentFiles = builtins.filter (
        name:
        (builtins.readDir ./experiments).${name} == "regular" && builtins.match ".*\\.kdl" name != null
      ) (builtins.attrNames (builtins.readDir ./experiments));

      tandemLib = import ./nix/lib.nix;
      sweeps = import ./nix/sweeps.nix { lib = tandemLib; };

      app = script: description: {
        type = "app";
        program = "${script}";
        meta.description = description;
      };
      # The apps' scripts, also kept as legacyPackages.${system}.scripts so they can be read.
      experimentScripts = builtins.listToAttrs (
        map (file: rec {
          name = builtins.head (builtins.match "(.*)\\.kdl" file);
          value = pkgs.writeShellScript "tandem-${name}" ''
            exec ${tandem}/bin/tandem train ${src}/experiments/${file} "$@"
          '';
        }) experimentFiles
      );
      sweepScripts = builtins.mapAttrs (
        name: sweep:
        pkgs.writeShellScript "tandem-sweep-${name}" ''
          exec ${tandem}/bin/tandem sweep --name ${name} "$@" ${builtins.concatStringsSep " " sweep.files}
        ''
      ) sweeps;
      # `nix run .#cartpole -- ARGS` is `tandem train experiments/cartpole.kdl ARGS`, with the
      # file read from the flake's source (so its includes are there too).
      experimentApps = builtins.mapAttrs (
        name: script: app script "Train experiments/${name}.kdl"
      ) experimentScripts;
      # `nix run .#NAME -- ARGS` is `tandem sweep --name NAME ARGS VARIANT...`.
      sweepApps = builtins.mapAttrs (
        name: script:
        app script "Train the variants of the sweep ${name} one after another and print their final returns"
      ) sweepScripts;
    in
    {
      # Pure functions (no system): experimentFile, override, variants, sweep, ... (nix/lib.nix).
      lib = tandemLib;

      packages.${system} = {
        default = tandem;
        inherit libtorch;
      };
      legacyPackages.${system}.scripts = experimentScripts // sweepScripts;

      apps.${system} =
        experimentApps
        // sweepApps
        // {
          default = {
            type = "app";
            program = "${tandem}/bin/tandem";
            meta.description = "Train, validate, resolve or play tandem experiments";
          };
        };

      devShells.${system}.default = requireRust (
        pkgs.mkShell {
          packages = [
            pkgs.rustc
            pkgs.cargo
            pkgs.clippy
            pkgs.rustfmt
            pkgs.cmake
            pkgs.zlib
            # The parity and fixture scripts under scripts/ make their own venvs with pip.
            pkgs.python3
          ];
          LIBTORCH = "${libtorch}";
          TANDEM_ALE_SRC = "${aleSource}";
          GLOO_INCLUDE_DIR = "${glooHeaders}/include";
        }
      );

      checks.${system} = {
        tests = buildTandem true;
        validate-experiments =
          pkgs.runCommand "tandem-validate-experiments"
            {
              nativeBuildInputs = [ tandem ];
              experimentsDir = ./experiments;
              experiments = experimentFiles;
            }
            ''
              cd "$experimentsDir"
              tandem validate $experiments
              touch "$out"
            '';
        # Every variant of every sweep in nix/sweeps.nix, as the sweep apps would run it.
        validate-sweeps =
          pkgs.runCommand "tandem-validate-sweeps"
            {
              nativeBuildInputs = [ tandem ];
              variants = builtins.concatMap (sweep: sweep.files) (builtins.attrValues sweeps);
            }
            ''
              tandem validate $variants
              touch "$out"
            '';
      };
    };
}
