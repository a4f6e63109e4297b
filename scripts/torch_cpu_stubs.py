"""Makes the PyPI (CUDA) build of torch importable on a CPU-only machine without
the gigabytes of NVIDIA wheels it declares.

`import torch` loads libtorch_python.so, which links libtorch_cuda.so and, through
it, cuDNN, cuBLAS, NCCL, cuFFT and more. On CPU none of their functions is ever
called, but the dynamic loader still insists that every library named in
DT_NEEDED exists and defines every symbol (and symbol version) referenced from
it. This script writes, for each such library that is missing, a tiny stand-in
with the right soname, the right version nodes and every referenced symbol
defined as a function that aborts with a message. The real CUDA runtime and
CUPTI (small wheels) stay real, so `torch.cuda.is_available()` answers False
honestly instead of crashing.

Usage: python torch_cpu_stubs.py SITE_PACKAGES_DIR
"""

import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict

# `import torch` loads this library and, through DT_NEEDED, the rest of the
# closure computed below; other torch libraries are opened lazily on GPU paths.
ROOT = "libtorch_python.so"


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args], check=True, capture_output=True, text=True).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", readelf("-d", path))


def version_owners(path):
    """Version name -> file that must define it, from the verneed section."""
    owners = {}
    current = None
    for line in readelf("-V", path).splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"Name: (\S+)", line)
        if m and current:
            owners[m.group(1)] = current
    return owners


def undefined_symbols(path):
    """(name, version or None) of every undefined dynamic symbol."""
    out = []
    for line in readelf("--dyn-syms", path).splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[6] == "UND":
            name = parts[7]
            version = None
            if "@" in name:
                name, version = name.split("@", 1)
                version = version.lstrip("@").split(" ")[0]
            out.append((name, version))
    return out


def main():
    site = sys.argv[1]
    lib_dir = os.path.join(site, "torch", "lib")
    present = set(os.listdir(lib_dir))
    # The real small wheels put their libraries here; torch's RUNPATH lists it.
    for extra in ["nvidia/cu13/lib"]:
        d = os.path.join(site, extra)
        if os.path.isdir(d):
            present |= set(os.listdir(d))
    system = set()
    missing = set()
    eager = []
    queue = [ROOT]
    while queue:
        lib = queue.pop()
        if lib in eager:
            continue
        eager.append(lib)
        for dep in needed(os.path.join(lib_dir, lib)):
            if dep in os.listdir(lib_dir):
                queue.append(dep)
            elif dep in present:
                continue
            else:
                found = subprocess.run(["sh", "-c", f"ldconfig -p | grep -q '{dep} '"]).returncode == 0
                (system if found else missing).add(dep)
    if not missing:
        print("torch_cpu_stubs: nothing missing")
        return
    symbols = defaultdict(set)  # stub lib -> {(name, version)}
    unversioned = set()
    for lib in eager:
        path = os.path.join(lib_dir, lib)
        owners = version_owners(path)
        for name, version in undefined_symbols(path):
            owner = owners.get(version) if version else None
            if owner in missing:
                symbols[owner].add((name, version))
            elif version is None:
                unversioned.add(name)
    # Unversioned references are looked up in the whole load scope; give the
    # ones no real library defines to the first stub.
    defined = set()
    for lib in present | system:
        path = os.path.join(lib_dir, lib)
        if os.path.isfile(path) and lib.startswith("lib") and ".so" in lib:
            for line in readelf("--dyn-syms", path).splitlines():
                parts = line.split()
                if len(parts) >= 8 and parts[6] != "UND":
                    defined.add(parts[7].split("@")[0])
    first = sorted(missing)[0]
    for name in unversioned - defined:
        if name.startswith(("cu", "nccl", "nvrtc", "nvshmem", "cublas", "cusparse")):
            symbols[first].add((name, None))
    with tempfile.TemporaryDirectory() as tmp:
        for stub in sorted(missing):
            entries = sorted(symbols[stub])
            src = os.path.join(tmp, "stub.c")
            script = os.path.join(tmp, "stub.map")
            with open(src, "w") as f:
                f.write("#include <stdio.h>\n#include <stdlib.h>\n")
                f.write(f'static void stub_called(const char *s) {{ fprintf(stderr, "{stub} is a CPU-only stub: %s was called\\n", s); abort(); }}\n')
                for name, _ in entries:
                    f.write(f'void {name}(void) {{ stub_called("{name}"); }}\n')
            versions = defaultdict(list)
            for name, version in entries:
                versions[version].append(name)
            with open(script, "w") as f:
                for version, names in versions.items():
                    if version is None:
                        continue
                    f.write(f"{version} {{ global: {' '.join(n + ';' for n in names)} }};\n")
                if None in versions or not versions:
                    f.write(f"STUB_BASE {{ global: {' '.join(n + ';' for n in versions.get(None, []))} }};\n" if versions.get(None) else "")
            if os.path.getsize(script) == 0:
                with open(script, "w") as f:
                    f.write("STUB_BASE { global: *; };\n")
            out = os.path.join(lib_dir, stub)
            subprocess.run(["cc", "-shared", "-fPIC", "-O0", "-o", out, src, f"-Wl,-soname,{stub}",
                            f"-Wl,--version-script={script}"], check=True)
            print(f"torch_cpu_stubs: {stub}: {len(entries)} symbols")


if __name__ == "__main__":
    main()
