# Compiles one compile-fail case and judges the result. Run as
#   cmake -DCOMPILER=<c++ or nvcc> -DFLAGS=<flags separated by |> -DSOURCE=<case> -DMODE=fail|ok
#         -DFLAVOR=gnu|nvcc -P check_compile.cmake           (gnu: g++ or clang++)
#
# MODE ok   (the twin): the compiler must succeed.
# MODE fail (the case, built with -DCTNN_FAIL): the compiler must fail, and its output must
#   - contain exactly one "error:" line (the mistake is reported once, with no cascade),
#   - and that line must contain the text of the case's `// expect: <text>` line,
#   - for a layer rule (`// expect-layer: <i>`), name ctnn::at_layer with index i and no other index;
#     for a network-level rule (no expect-layer line), not mention at_layer at all.
cmake_minimum_required(VERSION 3.25)

foreach(var COMPILER FLAGS SOURCE MODE FLAVOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_compile.cmake: -D${var}=... is required")
  endif()
endforeach()

string(REPLACE "|" ";" flags "${FLAGS}")
execute_process(COMMAND ${COMPILER} ${flags} ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)

function(fail why)
  message("---- compiler output ----\n${out}-------------------------")
  message(FATAL_ERROR "${SOURCE}: ${why}")
endfunction()

if(MODE STREQUAL "ok")
  if(NOT rc EQUAL 0)
    fail("the twin must compile, but the compiler returned ${rc}")
  endif()
  message(STATUS "compiles, as it should")
  return()
endif()

if(rc EQUAL 0)
  fail("compiled, but it must not")
endif()

# The expectations live in the case file itself.
file(STRINGS "${SOURCE}" expect_lines REGEX "^// expect: ")
list(LENGTH expect_lines n_expect)
if(NOT n_expect EQUAL 1)
  message(FATAL_ERROR "${SOURCE}: needs exactly one `// expect: <message>` line")
endif()
string(REGEX REPLACE "^// expect: " "" expected "${expect_lines}")
file(STRINGS "${SOURCE}" layer_lines REGEX "^// expect-layer: ")
string(REGEX REPLACE "^// expect-layer: *" "" expected_layer "${layer_lines}")

# Diagnostics are judged line by line; semicolons would split CMake lists, so they become commas
# (file(STRINGS) escapes them in the expected text; undo that the same way).
string(REPLACE ";" "," text "${out}")
string(REPLACE "\\;" "," expected "${expected}")
string(REGEX MATCHALL "[^\n]*error:[^\n]*" error_lines "${text}")
list(LENGTH error_lines n_errors)
if(NOT n_errors EQUAL 1)
  fail("expected exactly one error, got ${n_errors} (a cascade)")
endif()
string(FIND "${error_lines}" "${expected}" at)
if(at EQUAL -1)
  fail("the error is not the expected one: \"${expected}\"")
endif()

# The layer position, as each compiler prints an at_layer instantiation: g++ and clang as
# at_layer<3, ...>, g++ also as at_layer<Index, ...>::member() [with ... int Index = 3, ...], nvcc as
# at_layer<Index, ...>[::member] [with Index=3, ...]. Each pattern captures the index.
if(FLAVOR STREQUAL "nvcc")
  set(patterns "ctnn::at_layer<Index, Layer, InputShape>[^\n[]*\\[with Index=([0-9]+),")
else()
  set(patterns "ctnn::at_layer<([0-9]+), "
               "ctnn::at_layer<Index, Layer, InputShape>::[^\n[]*\\[with [^\n]* Index = ([0-9]+)")
endif()
set(indices "")
foreach(pattern IN LISTS patterns)
  string(REGEX MATCHALL "${pattern}" hits "${text}")
  foreach(hit IN LISTS hits)
    string(REGEX REPLACE "${pattern}" "\\1" index "${hit}")
    list(APPEND indices ${index})
  endforeach()
endforeach()
if(expected_layer STREQUAL "")
  if(out MATCHES "at_layer")
    fail("a network-level rule must not be reported through at_layer")
  endif()
else()
  if(NOT indices)
    fail("the output does not name the layer through ctnn::at_layer<${expected_layer}, ...>")
  endif()
  list(REMOVE_DUPLICATES indices)
  if(NOT indices STREQUAL expected_layer)
    fail("the output names layer(s) ${indices}; expected layer ${expected_layer} alone")
  endif()
endif()

message(STATUS "fails as it should, with: ${expected}")
