# Code off the inference path (the CLI verbs, the job service, API validation, the image recipes and
# registry client, and the tests) spends its time parsing, copying and waiting, not in loops, but
# was most of the build: at -O3 it was 1,340 of 2,150 compile seconds on a 2-core AVX2 EPYC, where
# GCC -O1 compiles a CLI verb in 11.7 s instead of 17.9 and clang -O0 (ASan) a test file in 9.7 s
# instead of 28.6. So in optimized builds it is compiled at KILN_COLD_OPT. The kernels, compilers,
# performance model, planning and the serving runtime (kiln_serving, kiln-runtime) keep the build
# type's flags.
set(KILN_COLD_OPT "-O1" CACHE STRING "Optimization flag for code off the inference path in optimized builds (empty: the build type's own)")

set(_kiln_cold_flag "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Release,RelWithDebInfo,MinSizeRel>>:${KILN_COLD_OPT}>")

# Targets given: their own sources only (the flag comes after the build type's, so it wins).
function(kiln_cold_code)
  if(KILN_COLD_OPT)
    foreach(target IN LISTS ARGN)
      target_compile_options(${target} PRIVATE ${_kiln_cold_flag})
    endforeach()
  endif()
endfunction()

# Every target defined after this call in the calling directory and below (tests/).
macro(kiln_cold_directory)
  if(KILN_COLD_OPT)
    add_compile_options(${_kiln_cold_flag})
  endif()
endmacro()
