# Writes OUT, the header naming the tree SRC holds (git describe: the commit, "-dirty" with
# uncommitted changes); file(CONFIGURE) rewrites it only when that changed. Run at every build
# rather than at configure time, so a result file names the code its binary was built from,
# however it was built.
cmake_minimum_required(VERSION 3.25)  # a script (cmake -P): the project's policies
execute_process(COMMAND git describe --always --dirty --abbrev=12
  WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit "unknown")
endif()
file(CONFIGURE OUTPUT ${OUT} @ONLY CONTENT "// Generated at build time by cmake/git_commit.cmake.
#pragma once

namespace sdpa::build_info {
inline constexpr const char* kGitCommit = \"@commit@\";
}  // namespace sdpa::build_info
")
