# ggml's CPU backend (llama.cpp's tensor library), built from the source tools/fetch_ggml.sh
# puts in build/deps/ggml, for the ggml peer entries (kernels/ggml.cpp). Static, the CPU backend
# only, for this machine's instruction set (GGML_NATIVE), with OpenMP threads as llama.cpp's
# Linux builds have them. Sets SDPA_GGML_RELEASE (what the source is) when it builds it, and
# says in one line why not otherwise: without the source, under the sanitizers and the fuzzer
# (its instrumented build would double CI's longest part), and cross-built (native ISA only).
set(SDPA_GGML_SOURCE "${CMAKE_SOURCE_DIR}/build/deps/ggml" CACHE PATH
    "ggml's source (llama.cpp's ggml/ and RELEASE), fetched by tools/fetch_ggml.sh")
set(SDPA_GGML_RELEASE "")
# Why not, where it is not built: the ggml entries' reason for a timing cell not run
# (kernel_elsewhere), beside the one line the configure prints.
set(SDPA_GGML_ABSENT "")
if(NOT EXISTS "${SDPA_GGML_SOURCE}/RELEASE")
  set(SDPA_GGML_ABSENT "no ggml source when it was configured (tools/fetch_ggml.sh fetches it)")
elseif(SDPA_SANITIZE OR SDPA_FUZZ OR CMAKE_CROSSCOMPILING)
  set(SDPA_GGML_ABSENT "ggml is not built under the sanitizers, the fuzzer or a cross-build")
endif()
if(SDPA_GGML_ABSENT)
  message(NOTICE "ggml: ${SDPA_GGML_ABSENT}; the ggml entries are absent")
  return()
endif()

file(STRINGS "${SDPA_GGML_SOURCE}/RELEASE" SDPA_GGML_RELEASE LIMIT_COUNT 1)
block(PROPAGATE SDPA_GGML_RELEASE)
  set(BUILD_SHARED_LIBS OFF)
  set(GGML_NATIVE ON)
  set(GGML_OPENMP ON)
  set(GGML_BACKEND_DL OFF)
  set(GGML_BUILD_TESTS OFF)
  set(GGML_BUILD_EXAMPLES OFF)
  set(GGML_CCACHE OFF)  # it would set a launcher for the whole project; ours comes from the env
  set(GGML_ALL_WARNINGS OFF)
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
  add_subdirectory("${SDPA_GGML_SOURCE}/ggml" "${CMAKE_BINARY_DIR}/ggml" EXCLUDE_FROM_ALL SYSTEM)
  # Its intrinsics at -O3 under our -Wall -Wextra: 2 500 lines of GCC's false
  # -W(maybe-)uninitialized and unused functions, none of them ours to act on.
  target_compile_options(ggml-base PRIVATE -w)
  target_compile_options(ggml-cpu PRIVATE -w)
endblock()
