# Sanitizer and fuzzing builds of kiln's own targets. Included from the top-level CMakeLists.txt
# before any kiln target is defined, so the flags set here (directory-wide compile and link
# options) reach kiln_kernels, kiln_compilers, kiln and every test. The ONNX, protobuf and libzip
# system libraries are linked as they are (not instrumented).
#
#   -DKILN_SANITIZE=address   AddressSanitizer + UndefinedBehaviorSanitizer (GCC or clang)
#   -DKILN_SANITIZE=thread    ThreadSanitizer
#   -DKILN_FUZZ=ON            libFuzzer targets under tests/fuzz (clang only): libraries built with
#                             -fsanitize=fuzzer-no-link,address,undefined, the fuzz targets
#                             linked with -fsanitize=fuzzer,address,undefined.
# Every UBSan finding aborts (-fno-sanitize-recover=all), so a finding fails the test or run.

set(KILN_SANITIZE "" CACHE STRING "Sanitizers for kiln's targets: empty (none), 'address' (ASan+UBSan) or 'thread' (TSan)")
set_property(CACHE KILN_SANITIZE PROPERTY STRINGS "" address thread)
option(KILN_FUZZ "Build the libFuzzer targets in tests/fuzz (needs clang; implies ASan+UBSan)" OFF)

set(_kiln_san_compile "")
set(_kiln_san_link "")
if(KILN_SANITIZE STREQUAL "address")
  set(_kiln_san_compile -fsanitize=address,undefined -fno-sanitize-recover=all)
  set(_kiln_san_link -fsanitize=address,undefined -fno-sanitize-recover=all)
elseif(KILN_SANITIZE STREQUAL "thread")
  set(_kiln_san_compile -fsanitize=thread)
  set(_kiln_san_link -fsanitize=thread)
elseif(NOT KILN_SANITIZE STREQUAL "")
  message(FATAL_ERROR "KILN_SANITIZE='${KILN_SANITIZE}': expected '', 'address' or 'thread'")
endif()

if(KILN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "KILN_FUZZ=ON needs clang (libFuzzer): configure with CC=clang CXX=clang++ "
                        "(found ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER})")
  endif()
  if(KILN_SANITIZE STREQUAL "thread")
    message(FATAL_ERROR "KILN_FUZZ=ON builds with ASan+UBSan; it cannot be combined with KILN_SANITIZE=thread")
  endif()
  set(_kiln_san_compile -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all)
  set(_kiln_san_link -fsanitize=address,undefined -fno-sanitize-recover=all)
endif()

if(_kiln_san_compile)
  # Line tables (-g1) and frame pointers: sanitizer stack traces with file:line at any optimization
  # level; full -g only adds variable info and ~15% build time (measured on a test file).
  add_compile_options(${_kiln_san_compile} -fno-omit-frame-pointer -g1)
  add_link_options(${_kiln_san_link})
  list(JOIN _kiln_san_compile " " _kiln_san_text)
  message(STATUS "kiln: sanitizers on (${_kiln_san_text})")
endif()

if(KILN_FUZZ)
  # The fuzz targets need kiln_kernels and kiln_compilers, which are defined after this file is
  # included: define them once the top-level CMakeLists.txt has been processed.
  cmake_language(DEFER CALL include "${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_targets.cmake")
endif()
