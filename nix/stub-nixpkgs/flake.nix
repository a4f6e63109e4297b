# An offline stand-in for nixpkgs, used only by tests/flake.rs to evaluate tandem's flake without
# network. It offers exactly the attributes the flake uses, each a plain `derivation` that can be
# instantiated (so hashes, store paths and references are checked) but never built.
{
  description = "Offline nixpkgs stub for evaluating tandem's flake";

  outputs =
    { self }:
    {
      legacyPackages.x86_64-linux = import ./packages.nix { system = "x86_64-linux"; };
    };
}
