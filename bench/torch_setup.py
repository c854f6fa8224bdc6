#!/usr/bin/python3
"""How the PyTorch peers start torch: thread pools capped to --threads (BLAS included), a warning when the BLAS
looks like the slow reference one, a fixed seed, and a description of the build (version, oneDNN, BLAS, ISA).

Works with Debian's python3-torch 1.13 (OpenBLAS through the generic BLAS interface) and with PyPI's torch 2.x
(MKL and oneDNN linked in)."""

import os
import sys
import time

# A 512x512 single-thread matmul reaches tens of GFLOP/s with OpenBLAS; the reference BLAS
# manages about one. Anything below this is the reference BLAS or a badly overloaded machine.
MIN_EXPECTED_GEMM_GFLOPS = 5.0


def limit_blas_threads(threads):
    """Caps the BLAS and OpenMP pools; must run before torch (and its BLAS) is imported.

    Debian's torch calls an external BLAS that torch.set_num_threads does not reach, so
    OpenBLAS would otherwise start one thread per core whatever --threads says. PyPI's torch
    links MKL, which set_num_threads does cap; the variables are harmless there.
    """
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)


def configure_torch_threads(torch, threads):
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)


def warn_if_slow_blas(torch):
    """Prints a warning to stderr when the BLAS torch uses looks like the slow reference one."""
    size, repeats = 512, 5
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    a = torch.randn(size, size)
    a @ a
    start = time.perf_counter()
    for _ in range(repeats):
        a @ a
    seconds = (time.perf_counter() - start) / repeats
    torch.set_num_threads(previous_threads)
    gflops = 2 * size ** 3 / seconds / 1e9

    blas_libraries = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "blas" in os.path.basename(path) or "blis" in os.path.basename(path):
                blas_libraries.add(os.path.realpath(path))
    optimised = any(("openblas" in p or "blis" in p or "mkl" in p) for p in blas_libraries)
    if gflops < MIN_EXPECTED_GEMM_GFLOPS or (blas_libraries and not optimised):
        print(f"WARNING: BLAS looks slow ({gflops:.1f} GFLOP/s single-thread sgemm; loaded: "
              f"{', '.join(sorted(blas_libraries)) or 'none found'}). PyTorch may be using the reference "
              f"BLAS; install libopenblas0-pthread (or select it with update-alternatives) before "
              f"trusting these numbers.", file=sys.stderr, flush=True)
    return gflops


def describe_torch(torch):
    """The build the peer runs: version, oneDNN and BLAS versions, and the ISA of ATen's own kernels.

    torch.__config__.show() names oneDNN "MKL-DNN" in 1.13 and in 2.x ("Intel(R) MKL-DNN v3.x"); 1.13
    has no torch.backends.cpu, so its ISA is read from the same text.
    """
    config = torch.__config__.show()
    description = {"version": torch.__version__, "onednn": None, "blas": None, "cpu_capability": None}
    for line in config.splitlines():
        line = line.strip().lstrip("- ")
        if "MKL-DNN" in line or "oneDNN" in line:
            description["onednn"] = (line.split("(Git Hash")[0].replace("Intel(R) ", "").replace("MKL-DNN", "oneDNN")
                                     .strip())
        elif line.startswith("CPU capability usage:"):
            description["cpu_capability"] = line.split(":", 1)[1].strip()
        elif line.startswith("Build settings:"):
            for item in line.split(":", 1)[1].split(","):
                if item.strip().startswith("BLAS_INFO="):
                    description["blas"] = item.strip().split("=", 1)[1]
    cpu = getattr(torch.backends, "cpu", None)
    if cpu is not None and hasattr(cpu, "get_cpu_capability"):
        description["cpu_capability"] = cpu.get_cpu_capability()
    return description


def describe_line(description):
    return (f"pytorch {description['version']} ({description['onednn'] or 'no oneDNN'}, BLAS "
            f"{description['blas'] or 'unknown'}, ATen CPU capability {description['cpu_capability'] or 'unknown'})")


def import_torch(threads, seed):
    """Imports torch configured for `threads` threads and seeded; call before anything else imports it."""
    limit_blas_threads(threads)
    import torch
    configure_torch_threads(torch, threads)
    warn_if_slow_blas(torch)
    torch.manual_seed(seed)
    return torch
