# lathe's version and git commit, baked into lathe_core (src/lathe/core/version.h) at configure time.
# The commit comes from -DLATHE_GIT_COMMIT=..., else `git rev-parse` of the source tree, else
# "unknown" (a release tarball, or no git installed). Configure re-runs when HEAD moves (a commit, a
# checkout), so the baked commit follows the tree without a manual re-configure.
if(NOT LATHE_GIT_COMMIT)
  set(LATHE_GIT_COMMIT "unknown")
  find_package(Git QUIET)
  if(GIT_FOUND)
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
                    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE commit RESULT_VARIABLE failed
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --absolute-git-dir
                    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE git_dir RESULT_VARIABLE dir_failed
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(NOT failed AND commit)
      set(LATHE_GIT_COMMIT "${commit}")
    endif()
    if(NOT dir_failed AND EXISTS "${git_dir}/logs/HEAD")
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${git_dir}/logs/HEAD")
    endif()
  endif()
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/version.cc.in ${CMAKE_BINARY_DIR}/generated/lathe_version.cc @ONLY)
target_sources(lathe_core PRIVATE ${CMAKE_BINARY_DIR}/generated/lathe_version.cc)
message(STATUS "lathe ${PROJECT_VERSION} (commit ${LATHE_GIT_COMMIT})")
