# Precompiled headers for targets whose many files each parse the same heavy third-party headers
# (Catch2's single header in every test file; CLI11 and nlohmann/json in every CLI verb): parsed
# once per target instead of once per file. KILN_PCH=OFF compiles without them.
option(KILN_PCH "Precompile the heavy third-party headers of the CLI and the tests" ON)

# kiln_precompile(TARGET HEADER...): TARGET's own files start from HEADER... precompiled.
function(kiln_precompile target)
  if(KILN_PCH)
    target_precompile_headers(${target} PRIVATE ${ARGN})
  endif()
endfunction()
