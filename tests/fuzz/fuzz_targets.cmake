# libFuzzer targets (configure with CC=clang CXX=clang++ -DKILN_FUZZ=ON; cmake/sanitizers.cmake
# includes this file at the end of the top-level CMakeLists.txt, once the libraries exist). kiln's libraries are built with -fsanitize=fuzzer-no-link,address,undefined;
# these executables link libFuzzer's main with -fsanitize=fuzzer. Seed corpora live in
# corpus/<target>/, dictionaries next to this file; scripts/hardening.sh runs them.
set(KILN_FUZZ_DIR "${CMAKE_CURRENT_LIST_DIR}")
function(kiln_add_fuzzer name)
  add_executable(${name} ${KILN_FUZZ_DIR}/${name}.cpp)
  target_link_libraries(${name} PRIVATE ${ARGN} kiln_warnings)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
endfunction()

kiln_add_fuzzer(fuzz_npy kiln_kernels)
kiln_add_fuzzer(fuzz_npz kiln_kernels)
kiln_add_fuzzer(fuzz_plan_file kiln_kernels)
kiln_add_fuzzer(fuzz_idx kiln_kernels)
if(NOT KILN_KERNELS_ONLY)
  kiln_add_fuzzer(fuzz_onnx_import kiln_compilers kiln_kernels)
  kiln_add_fuzzer(fuzz_description kiln_api)
  kiln_add_fuzzer(fuzz_v2_request kiln_serving)
  kiln_add_fuzzer(fuzz_profile_import kiln_perfmodel)
  kiln_add_fuzzer(fuzz_multipart kiln_service)
  kiln_add_fuzzer(fuzz_service_router kiln_service)
endif()
