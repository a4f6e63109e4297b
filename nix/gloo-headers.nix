# Gloo's C++ headers, from Debian's libgloo-dev (the headers tandem's c10d shim is built with on
# Debian). Only include/ is kept: libtorch_cpu.so already contains gloo's code.
{
  stdenv,
  fetchurl,
  dpkg,
  sources,
}:
stdenv.mkDerivation {
  pname = "gloo-headers";
  version = "0.0-git20220518.5b14351";
  src = fetchurl {
    inherit (sources.glooHeaders) url sha256;
    name = "libgloo-dev.deb";
  };
  nativeBuildInputs = [ dpkg ];
  unpackPhase = ''
    runHook preUnpack
    dpkg-deb -x "$src" unpacked
    runHook postUnpack
  '';
  dontConfigure = true;
  dontBuild = true;
  installPhase = ''
    runHook preInstall
    mkdir -p "$out"
    cp -r unpacked/usr/include "$out/include"
    test -f "$out/include/gloo/allreduce.h"
    runHook postInstall
  '';
}
