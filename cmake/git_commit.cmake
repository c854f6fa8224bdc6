# Writes OUTPUT, a header defining LOCKSTEP_GIT_COMMIT: the commit of SOURCE_DIR (12 hex digits, "-dirty"
# with uncommitted changes to tracked files, "unknown" outside a git checkout). Run at every build; the file is
# rewritten only when the text changes, so that only version.cc recompiles, and only then.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD OUTPUT_VARIABLE commit
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE status ERROR_QUIET)
if(status EQUAL 0)
  execute_process(COMMAND git -C "${SOURCE_DIR}" diff --quiet HEAD RESULT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    set(commit "${commit}-dirty")
  endif()
else()
  set(commit unknown)
endif()
set(text "#define LOCKSTEP_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT text STREQUAL old)
  file(WRITE "${OUTPUT}" "${text}")
endif()
