# The Arcade Learning Environment 0.12.1 source (the ale-py sdist), unpacked the way
# scripts/setup-ale leaves it, so crates/tandem-ale's build script accepts it through
# TANDEM_ALE_SRC. ALE is GPL-2.0.
{
  stdenv,
  fetchurl,
  sources,
}:
stdenv.mkDerivation {
  pname = "ale-py-source";
  version = "0.12.1";
  src = fetchurl {
    inherit (sources.ale) url sha256;
    name = sources.ale.file;
  };
  dontConfigure = true;
  dontBuild = true;
  installPhase = ''
    runHook preInstall
    test -f src/ale/ale_interface.hpp && test -f src/ale/python/roms/breakout.bin
    cp -r . "$out"
    # fetchurl checked this sha256; the marker is how the build script knows the tree is the pinned one.
    echo ${sources.ale.sha256} > "$out/.tandem-verified"
    runHook postInstall
  '';
  dontFixup = true;
}
