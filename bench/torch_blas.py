"""What the PyTorch peers' matrix products run on, and the rule that keeps the comparison fair.

Debian's torch runs its products on the system BLAS (libopenblas0-pthread), and OpenBLAS picks its kernels for
the processor when it loads. A machine can pin older ones through OPENBLAS_CORETYPE, and OPENBLAS_L2_SIZE changes
its blocking; a peer should run as the machine's own. So importing this module (before torch) runs the script
again once without both, unless ATTNVIZ_PEER_BLAS=keep asks to keep them: measuring an AVX2 machine on an
AVX-512 one, ATTNVIZ_PEER_BLAS=keep OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 (beside attnviz's
ATTNVIZ_MAX_ISA=avx2). describe() is the line each peer prints first: which kernels ran, and the environment.
"""
import ctypes
import os
import sys

PINS = ('OPENBLAS_CORETYPE', 'OPENBLAS_L2_SIZE')

if 'torch' not in sys.modules and os.environ.get('ATTNVIZ_PEER_BLAS') not in ('keep', 'rerun') and \
        any(name in os.environ for name in PINS):
    env = {k: v for k, v in os.environ.items() if k not in PINS}
    env['ATTNVIZ_PEER_BLAS'] = 'rerun'  # once: never again, whatever the interpreter's start adds
    os.execve(sys.executable, sys.orig_argv, env)


def blas_kernel():
    """The BLAS library torch loaded (from this process's mappings), and the OpenBLAS kernels it runs."""
    with open('/proc/self/maps') as f:
        libs = sorted({line.split()[-1] for line in f if 'blas' in line.split()[-1]})
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return f'{path}: OpenBLAS, {lib.openblas_get_corename().decode()} kernels'
        except (OSError, AttributeError):
            continue
    return f'{", ".join(libs) or "none found"} (not OpenBLAS: the reference BLAS is slow)'


def describe(torch):
    """torch's version and threads, its BLAS and kernels, and the variables that choose them."""
    env = ', '.join(f'{name}={os.environ.get(name, "(unset)")}' for name in PINS + ('ATEN_CPU_CAPABILITY',))
    return f'torch {torch.__version__}, {torch.get_num_threads()} threads, BLAS {blas_kernel()}; {env}'
