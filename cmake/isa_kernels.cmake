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

# The wrapper files' stem for a kernel source: its path below the source tree, '/' -> '_', no .cc.
function(lathe_kernel_stem source out)
  file(RELATIVE_PATH relative ${CMAKE_SOURCE_DIR} ${source})
  string(REPLACE "/" "_" stem ${relative})
  string(REGEX REPLACE "\\.cc$" "" stem ${stem})
  set(${out} ${stem} PARENT_SCOPE)
endfunction()

# The kernels' optimisation level, after the build's own (so it wins even in the -Og sanitizer
# build): at least -O2, since below it the inline std:: helpers a kernel uses are emitted as weak
# symbols compiled for its ISA, and the linker may pick an AVX-512 copy for the whole program
# (isa_symbol_check). -O3 in release builds; -O2 under the sanitizers, where -O3 tripled the compile
# time of the instrumented GEMM kernels (grouped matmul AVX-512: 107 s -> 34 s).
if(LATHE_SANITIZE)
  set(LATHE_KERNEL_OPT -O2)
else()
  set(LATHE_KERNEL_OPT -O3)
endif()

# The sanitizer build exists to run the tests under the sanitizers on this machine, so a kernel
# object for an instruction set this machine lacks (AVX-512 on an AVX2-only CPU; the AMX tiles
# without AMX) can never run in it: it is compiled, so compile errors still show, but not
# instrumented, which takes half as long (the AVX-512 objects were 17% of an AVX2 machine's
# sanitizer build). Read from /proc/cpuinfo; elsewhere (no such file) everything is instrumented.
set(LATHE_ISA_UNINSTRUMENTED "")
if(LATHE_SANITIZE AND EXISTS /proc/cpuinfo)
  file(STRINGS /proc/cpuinfo cpu_flags REGEX "^flags" LIMIT_COUNT 1)
  string(REGEX REPLACE "^flags[ \t]*:" " " cpu_flags "${cpu_flags}")
  string(APPEND cpu_flags " ")
  foreach(flag avx512f avx512bw avx512vl avx512dq)
    if(NOT cpu_flags MATCHES " ${flag} ")
      list(APPEND LATHE_ISA_UNINSTRUMENTED avx512 amx)
      break()
    endif()
  endforeach()
  foreach(flag amx_tile amx_bf16)
    if(NOT cpu_flags MATCHES " ${flag} ")
      list(APPEND LATHE_ISA_UNINSTRUMENTED amx)
      break()
    endif()
  endforeach()
  list(REMOVE_DUPLICATES LATHE_ISA_UNINSTRUMENTED)
  if(LATHE_ISA_UNINSTRUMENTED)
    message(STATUS "lathe: kernel objects not instrumented (this CPU cannot run them): ${LATHE_ISA_UNINSTRUMENTED}")
  endif()
endif()

# lathe_isa_compile_options(isa out): the compile options of a kernel object for isa.
function(lathe_isa_compile_options isa out)
  set(options ${LATHE_KERNEL_OPT} ${LATHE_ISA_FLAGS_${isa}})
  if(isa IN_LIST LATHE_ISA_UNINSTRUMENTED)
    list(APPEND options -fno-sanitize=all)
  endif()
  set(${out} "${options}" PARENT_SCOPE)
endfunction()

# Kernels `lathe optimize --emit` promoted (bench/suite/found/found_*_kernels.cc) skip the scalar
# copy (they are suite paths; a machine without AVX2 runs the composed path instead) and are
# compiled together, in two objects per ISA whose wrappers include them: each file is its own
# namespace (generated_<problem>), and parsing the shared headers took about half of a found
# kernel's compile on its own (30 kernels: 61 s -> 30 s of CPU per ISA, release build).
function(lathe_add_isa_kernels target)
  set(found "")
  foreach(source ${ARGN})
    if(source MATCHES "/bench/suite/found/found_[^/]*_kernels\\.cc$")
      list(APPEND found ${source})
      continue()
    endif()
    lathe_kernel_stem(${source} stem)
    foreach(index RANGE 0 2)
      list(GET LATHE_ISA_NAMES ${index} isa)
      lathe_add_isa_wrapper(${target} ${stem} ${isa} ${index} ${source})
    endforeach()
  endforeach()
  # Two groups per ISA, so that no single object is a long tail of a -j2 build (one AVX-512 group
  # of 30 took 166 s under the sanitizers).
  list(SORT found)
  list(LENGTH found count)
  math(EXPR half "(${count} + 1) / 2")
  if(count GREATER 0)
    list(SUBLIST found 0 ${half} first)
    list(SUBLIST found ${half} -1 second)
    foreach(index RANGE 1 2)
      list(GET LATHE_ISA_NAMES ${index} isa)
      lathe_add_isa_wrapper(${target} src_lathe_bench_suite_found_found_kernels_a ${isa} ${index} ${first})
      if(second)
        lathe_add_isa_wrapper(${target} src_lathe_bench_suite_found_found_kernels_b ${isa} ${index} ${second})
      endif()
    endforeach()
  endif()
endfunction()

# lathe_add_isa_wrapper(target stem isa index source...): isa_kernels/<stem>.<isa>.cc, which
# defines LATHE_KERNEL_ISA as index and includes the sources, compiled with that ISA's flags.
function(lathe_add_isa_wrapper target stem isa index)
  set(content "#define LATHE_KERNEL_ISA ${index}\n")
  foreach(source ${ARGN})
    string(APPEND content "#include \"${source}\"\n")
  endforeach()
  set(wrapper ${CMAKE_BINARY_DIR}/isa_kernels/${stem}.${isa}.cc)
  file(CONFIGURE OUTPUT ${wrapper} CONTENT "${content}")
  lathe_isa_compile_options(${isa} options)
  set_source_files_properties(${wrapper} PROPERTIES COMPILE_OPTIONS "${options}" SKIP_PRECOMPILE_HEADERS ON)
  target_sources(${target} PRIVATE ${wrapper})
endfunction()

# lathe_add_amx_kernels(target file...)
# AMX tile kernels (*_amx_kernels.cc), written once against src/lathe/core/amx_tiles.h, compiled
# three times: with the real tile instructions (LATHE_AMX_TILES=1: the AVX-512 compilation,
# namespace lathe::avx512, plus -mamx-tile -mamx-bf16; run only while core/amx.h's amx_active()),
# against the scalar emulation of the tile instructions (LATHE_KERNEL_ISA=0, namespace
# lathe::scalar; run by the tests on every machine), and the AVX-512 build again on the emulation
# (namespace lathe::avx512_emulated_tiles): the tests run it where the CPU has AVX512_BF16 and
# compare it with the scalar build, so the vector code around the tiles that an AMX machine runs
# (packing, softmax, epilogues) is checked off one. Tile instructions appear in the .amx objects
# only (tests/isa_symbol_check.sh).
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag("-mamx-tile -mamx-bf16" LATHE_COMPILER_HAS_AMX)
if(NOT LATHE_COMPILER_HAS_AMX)
  message(FATAL_ERROR "the compiler does not accept -mamx-tile -mamx-bf16 (GCC >= 11 or Clang >= 12 needed)")
endif()
set(LATHE_ISA_FLAGS_amx "${LATHE_ISA_FLAGS_avx512};-mamx-tile;-mamx-bf16")

function(lathe_add_amx_kernels target)
  foreach(source ${ARGN})
    lathe_kernel_stem(${source} stem)
    set(hardware ${CMAKE_BINARY_DIR}/isa_kernels/${stem}.amx.cc)
    file(CONFIGURE OUTPUT ${hardware}
         CONTENT "#define LATHE_KERNEL_ISA 2\n#define LATHE_AMX_TILES 1\n#include \"${source}\"\n")
    lathe_isa_compile_options(amx options)
    set_source_files_properties(${hardware} PROPERTIES COMPILE_OPTIONS "${options}" SKIP_PRECOMPILE_HEADERS ON)
    set(emulated ${CMAKE_BINARY_DIR}/isa_kernels/${stem}.amx_emulated.cc)
    file(CONFIGURE OUTPUT ${emulated}
         CONTENT "#define LATHE_KERNEL_ISA 0\n#define LATHE_AMX_TILES 0\n#include \"${source}\"\n")
    set_source_files_properties(${emulated} PROPERTIES COMPILE_OPTIONS "${LATHE_KERNEL_OPT}" SKIP_PRECOMPILE_HEADERS ON)
    set(emulated_avx512 ${CMAKE_BINARY_DIR}/isa_kernels/${stem}.amx_emulated_avx512.cc)
    file(CONFIGURE OUTPUT ${emulated_avx512}
         CONTENT "#define LATHE_KERNEL_ISA 2\n#define LATHE_AMX_TILES 0\n#define LATHE_ISA_NS avx512_emulated_tiles\n#include \"${source}\"\n")
    lathe_isa_compile_options(avx512 avx512_options)
    set_source_files_properties(${emulated_avx512} PROPERTIES COMPILE_OPTIONS "${avx512_options}"
                                SKIP_PRECOMPILE_HEADERS ON)
    target_sources(${target} PRIVATE ${hardware} ${emulated} ${emulated_avx512})
  endforeach()
endfunction()
