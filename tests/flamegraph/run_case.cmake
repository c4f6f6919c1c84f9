# SPDX-License-Identifier: MIT OR Apache-2.0
# One `culpert flamegraph` test case (cmake -P). Builds the fixture profile
# with mkprofile, runs the command and checks what a user would see.
#
#   -DCULPERT= -DMKPROFILE=      the two programs
#   -DFIXTURE=                   mkprofile text description
#   -DWORK=                      scratch directory for this case
#   -DARGS=a|b|c                 arguments after "flamegraph", '|'-separated;
#                                @PROFILE@ is the built profile, @OUT@ a path
#                                in WORK for -o
#   -DBASE_FIXTURE=              a second description, built as @BASE@ (the
#                                base of a differential graph)
#   -DEXPECT_RC=0                exit status (default 0)
#   -DSTDERR_REGEX=              stderr must match (default: must be empty
#                                when EXPECT_RC is 0)
#   -DGOLDEN=                    stdout (or @OUT@ when OUT_EXPECT=exists)
#                                must equal this file; UPDATE_GOLDEN=1 in the
#                                environment rewrites it instead
#   -DOUT_EXPECT=exists|absent   whether @OUT@ exists afterwards; either
#                                way no temporary file may be left next to it
#   -DSVG=1                      the output is an SVG: run SVGCHECK (and
#                                XMLLINT when set) on it
#   -DCONTAINS=a|b  -DABSENT=a|b strings the output must / must not contain;
#                                @SC@ stands for ';'
#   -DSTDOUT_TO=/dev/full        send stdout there (write-error cases)
#   -DSTDIN=1                    feed the built profile on standard input
#   -DPRESET_OUT=TEXT            write TEXT to @OUT@ before the run
#   -DOUT_NAME=NAME              @OUT@'s file name (default out.dat)
#   -DNODE= -DNODE_SCRIPT=       run `NODE NODE_SCRIPT OUTPUT` last (SVG
#                                behaviour checks); it must exit 0
cmake_minimum_required(VERSION 3.25)

function(fail msg)
  message(FATAL_ERROR "${msg}")
endfunction()

if(NOT DEFINED EXPECT_RC)
  set(EXPECT_RC 0)
endif()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(profile "${WORK}/profile.pb.gz")
if(NOT DEFINED OUT_NAME)
  set(OUT_NAME out.dat)
endif()
set(out "${WORK}/${OUT_NAME}")

execute_process(COMMAND "${MKPROFILE}" "${FIXTURE}" "${profile}"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  fail("mkprofile ${FIXTURE} failed (${rc}): ${err}")
endif()

set(base "${WORK}/base.pb.gz")
if(DEFINED BASE_FIXTURE)
  execute_process(COMMAND "${MKPROFILE}" "${BASE_FIXTURE}" "${base}"
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    fail("mkprofile ${BASE_FIXTURE} failed (${rc}): ${err}")
  endif()
endif()

if(DEFINED PRESET_OUT)
  file(WRITE "${out}" "${PRESET_OUT}\n")
endif()
set(input_file /dev/null)
if(STDIN)
  set(input_file "${profile}")
endif()

string(REPLACE "@PROFILE@" "${profile}" args "${ARGS}")
string(REPLACE "@BASE@" "${base}" args "${args}")
string(REPLACE "@OUT@" "${out}" args "${args}")
string(REPLACE "@WORK@" "${WORK}" args "${args}")
string(REPLACE "|" ";" args "${args}")
if(DEFINED STDOUT_TO)
  execute_process(COMMAND "${CULPERT}" flamegraph ${args} INPUT_FILE "${input_file}"
                  RESULT_VARIABLE rc OUTPUT_FILE "${STDOUT_TO}" ERROR_VARIABLE stderr)
  set(stdout "")
else()
  execute_process(COMMAND "${CULPERT}" flamegraph ${args} INPUT_FILE "${input_file}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
endif()
if(NOT rc STREQUAL "${EXPECT_RC}")
  fail("exit status ${rc}, expected ${EXPECT_RC}; stderr:\n${stderr}")
endif()
if(DEFINED STDERR_REGEX)
  if(NOT stderr MATCHES "${STDERR_REGEX}")
    fail("stderr does not match '${STDERR_REGEX}':\n${stderr}")
  endif()
elseif(EXPECT_RC EQUAL 0 AND NOT stderr STREQUAL "")
  fail("unexpected stderr:\n${stderr}")
endif()

# What the user got: the -o file when one is expected, else stdout.
set(result "${stdout}")
set(result_file "${WORK}/stdout.dat")
file(WRITE "${result_file}" "${stdout}")
if(DEFINED OUT_EXPECT)
  file(GLOB leftovers "${out}.tmp.*")
  if(leftovers)
    fail("temporary output left behind: ${leftovers}")
  endif()
  if(OUT_EXPECT STREQUAL "exists")
    if(NOT EXISTS "${out}")
      fail("-o did not create ${out}")
    endif()
    if(NOT stdout STREQUAL "")
      fail("-o FILE still wrote to stdout:\n${stdout}")
    endif()
    file(READ "${out}" result)
    set(result_file "${out}")
  elseif(EXISTS "${out}")
    fail("${out} exists although the command failed")
  endif()
endif()

if(DEFINED GOLDEN)
  if("$ENV{UPDATE_GOLDEN}" STREQUAL "1")
    file(WRITE "${GOLDEN}" "${result}")
  else()
    file(READ "${GOLDEN}" want)
    if(NOT result STREQUAL want)
      fail("output differs from ${GOLDEN}:\n--- got ---\n${result}--- want ---\n${want}")
    endif()
  endif()
endif()

if(SVG)
  execute_process(COMMAND "${SVGCHECK}" "${result_file}" RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    fail("svgcheck rejects the SVG: ${err}")
  endif()
  if(XMLLINT)
    execute_process(COMMAND "${XMLLINT}" --noout "${result_file}" RESULT_VARIABLE rc
                    ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      fail("xmllint rejects the SVG: ${err}")
    endif()
  endif()
endif()

if(DEFINED CONTAINS)
  string(REPLACE "|" ";" items "${CONTAINS}")
  foreach(s IN LISTS items)
    string(REPLACE "@SC@" ";" s "${s}")
    string(FIND "${result}" "${s}" at)
    if(at EQUAL -1)
      fail("output does not contain '${s}'")
    endif()
  endforeach()
endif()
if(DEFINED ABSENT)
  string(REPLACE "|" ";" items "${ABSENT}")
  foreach(s IN LISTS items)
    string(REPLACE "@SC@" ";" s "${s}")
    string(FIND "${result}" "${s}" at)
    if(NOT at EQUAL -1)
      fail("output contains '${s}'")
    endif()
  endforeach()
endif()

if(DEFINED NODE_SCRIPT)
  execute_process(COMMAND "${NODE}" "${NODE_SCRIPT}" "${result_file}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE nout ERROR_VARIABLE nerr)
  if(NOT rc EQUAL 0)
    fail("${NODE_SCRIPT} failed (${rc}):\n${nout}${nerr}")
  endif()
endif()
