# lathe_add_isa_kernels(target file...)
# Compiles each kernel source three times: portable scalar, AVX2+FMA and AVX-512 (+BF16), with
# LATHE_KERNEL_ISA = 0, 1, 2. The source puts its code in namespace lathe::LATHE_ISA_NS (see
# src/lathe/core/simd.h), so the three objects define distinct symbols and dispatch picks one at
# run time.
set(LATHE_ISA_NAMES scalar avx2 avx512)
set(LATHE_ISA_FLAGS_scalar "")
set(LATHE_ISA_FLAGS_avx2 "-mavx2;-mfma;-mf16c")
# -Wno-(maybe-)uninitialized: GCC 12 false positives inside avx512fintrin.h (_mm512_undefined_*,
# e.g. in _mm512_max_ps and _mm512_reduce_add_ps); the same source compiled for scalar and AVX2
# keeps both warnings, so real mistakes in kernel code are still reported.
set(LATHE_ISA_FLAGS_avx512 "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mprefer-vector-width=512;-Wno-maybe-uninitialized;-Wno-uninitialized")

function(lathe_add_isa_kernels target)
  foreach(source ${ARGN})
    file(RELATIVE_PATH relative ${CMAKE_SOURCE_DIR} ${source})
    string(REPLACE "/" "_" stem ${relative})
    string(REGEX REPLACE "\\.cc$" "" stem ${stem})
    foreach(index RANGE 2)
      list(GET LATHE_ISA_NAMES ${index} isa)
      set(wrapper ${CMAKE_BINARY_DIR}/isa_kernels/${stem}.${isa}.cc)
      file(CONFIGURE OUTPUT ${wrapper} CONTENT "#define LATHE_KERNEL_ISA ${index}\n#include \"${source}\"\n")
      # Always -O3 (after the build's own level, so it wins even in the -O1 sanitizer build): below
      # -O2 the inline std:: helpers a kernel uses are emitted as weak symbols compiled for its ISA,
      # and the linker may pick an AVX-512 copy for the whole program (isa_symbol_check).
      set_source_files_properties(${wrapper} PROPERTIES COMPILE_OPTIONS "-O3;${LATHE_ISA_FLAGS_${isa}}")
      target_sources(${target} PRIVATE ${wrapper})
    endforeach()
  endforeach()
endfunction()
