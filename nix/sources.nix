# Every file the flake downloads, each pinned by its sha256.
#
# The Python wheels and the ALE sdist are the very files scripts/setup and scripts/setup-ale
# fetch with pip (same names, same sha256; tests/flake.rs fails when the two disagree). Their
# URLs are what PyPI reports for those files (`pip install --dry-run --report`, field
# download_info.url). The gloo headers come from Debian 12's libgloo-dev package (what
# scripts/setup installs there); its sha256 is the one in Debian's package index (`apt-cache show`).
{
  # libtorch 2.13.0 (lib/ and include/ are taken from the wheel; no Python torch is used).
  torch = {
    file = "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl";
    url = "https://files.pythonhosted.org/packages/f3/82/fea946351658e6534db52d2cc12bc53087cbf87f9440c5f180f367c1950b/torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl";
    sha256 = "796633c4cdf0fe2cdced72d8f88f22e73dbcfce83132763162f6d4bff13b820b";
  };
  # libtorch_cpu.so NEEDS libcudart.so.13 and libcupti.so.13 even on CPU; these hold them.
  cudaRuntime = {
    file = "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl";
    url = "https://files.pythonhosted.org/packages/2e/24/d1558f3b68b1d26e706813b1d10aa1d785e4698c425af8db8edc3dced472/nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl";
    sha256 = "7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548";
  };
  cudaCupti = {
    file = "nvidia_cuda_cupti-13.0.85-py3-none-manylinux_2_25_x86_64.whl";
    url = "https://files.pythonhosted.org/packages/33/6d/737d164b4837a9bbd202f5ae3078975f0525a55730fe871d8ed4e3b952b0/nvidia_cuda_cupti-13.0.85-py3-none-manylinux_2_25_x86_64.whl";
    sha256 = "4eb01c08e859bf924d222250d2e8f8b8ff6d3db4721288cf35d14252a4d933c8";
  };
  # The Arcade Learning Environment 0.12.1: C++ source and game ROMs (GPL-2.0).
  ale = {
    file = "ale_py-0.12.1.tar.gz";
    url = "https://files.pythonhosted.org/packages/3e/e8/e69da8a5fb5feafa9fffb32ed8c2b306b7571b77faf779f61e4eb53304ec/ale_py-0.12.1.tar.gz";
    sha256 = "c503d574c5983e1063b451201ccb779d935919c0f6bf116fb0f4f8aa4c86d249";
  };
  # Gloo's headers (c10d's ProcessGroupGloo.hpp includes them; the wheel does not ship them).
  # nixpkgs has no gloo package. Debian moves superseded versions off its mirrors to
  # snapshot.debian.org; update this pin (and scripts/setup's package) together.
  glooHeaders = {
    file = "libgloo-dev_0.0~git20220518.5b14351-3_amd64.deb";
    url = "mirror://debian/pool/main/g/gloo/libgloo-dev_0.0~git20220518.5b14351-3_amd64.deb";
    sha256 = "80529c9fd8af452faf489e686b94bf87075965c40673803810c4f41634b1e299";
  };
}
