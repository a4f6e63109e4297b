# libtorch 2.13.0 as scripts/setup lays it out (lib/ and include/ of the PyPI torch wheel, plus
# the two NVIDIA runtime libraries its libtorch_cpu.so links against even on CPU), made to run
# outside a manylinux system: autoPatchelfHook points every library at Nix's libstdc++.
{
  stdenv,
  fetchurl,
  unzip,
  autoPatchelfHook,
  sources,
}:
let
  fetchPinned = source: fetchurl { inherit (source) url sha256; name = source.file; };
in
stdenv.mkDerivation {
  pname = "libtorch";
  version = "2.13.0";
  torchWheel = fetchPinned sources.torch;
  cudaRuntimeWheel = fetchPinned sources.cudaRuntime;
  cuptiWheel = fetchPinned sources.cudaCupti;
  dontUnpack = true;
  # Keep the libraries as PyPI ships them (stripping 1 GB of them gains nothing).
  dontStrip = true;
  nativeBuildInputs = [
    unzip
    autoPatchelfHook
  ];
  # libstdc++ and libgcc_s for the wheel's libraries (they bring their own libgomp).
  buildInputs = [ stdenv.cc.cc.lib ];
  # Only the CUDA half of libtorch (libtorch_cuda.so and friends) needs these. tandem's CPU build
  # never loads it; a CUDA build needs a CUDA-enabled libtorch with the CUDA stack anyway.
  autoPatchelfIgnoreMissingDeps = [
    "libcublas.so.13"
    "libcublasLt.so.13"
    "libcuda.so.1"
    "libcudnn.so.9"
    "libcufft.so.12"
    "libcufile.so.0"
    "libcurand.so.10"
    "libcusolver.so.12"
    "libcusparse.so.12"
    "libcusparseLt.so.0"
    "libnccl.so.2"
    "libnvrtc.so.13"
    "libnvshmem_host.so.3"
  ];
  installPhase = ''
    runHook preInstall
    unzip -q "$torchWheel" 'torch/lib/*' 'torch/include/*' -d unpacked
    mkdir -p "$out"
    mv unpacked/torch/lib "$out/lib"
    mv unpacked/torch/include "$out/include"
    # For the Python extension only; it would need libpython.
    rm -f "$out/lib/libtorch_python.so"
    unzip -q -j "$cudaRuntimeWheel" 'nvidia/cu13/lib/libcudart.so.13' -d "$out/lib"
    unzip -q -j "$cuptiWheel" 'nvidia/cu13/lib/libcupti.so.13' -d "$out/lib"
    # torch-sys links -lgomp; let it find the OpenMP runtime libtorch_cpu.so itself uses.
    ln -s libgomp.so.1 "$out/lib/libgomp.so"
    echo 2.13.0 > "$out/build-version"
    runHook postInstall
  '';
  meta = {
    description = "libtorch 2.13.0 from the PyPI torch wheel (CPU use)";
    platforms = [ "x86_64-linux" ];
  };
}
