# Writes OUT, the header naming the tree SRC holds (git describe: the commit, "-dirty" with
# uncommitted changes), and rewrites it only when that changed. Run at every build rather than at
# configure time, so a result file names the code its binary was built from, however it was built.
execute_process(COMMAND git describe --always --dirty --abbrev=12
  WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit "unknown")
endif()
set(text "// Generated at build time by cmake/git_commit.cmake.
#pragma once

namespace sdpa::build_info {
inline constexpr const char* kGitCommit = \"${commit}\";
}  // namespace sdpa::build_info
")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
