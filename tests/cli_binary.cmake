# Runs the built attnviz-cli: the default run succeeds, a bad input fails cleanly (exit 1, not a signal),
# --tokenize finds GPT-2's vocabulary installed beside the executable (<build>/share/attnviz/gpt2), and the
# environment variables that make a process run as on another machine take effect.
execute_process(COMMAND ${CLI} RESULT_VARIABLE ok_status OUTPUT_VARIABLE ok_out ERROR_VARIABLE ok_err)
if(NOT ok_status EQUAL 0 OR NOT ok_out MATCHES "head 1 attention weights")
  message(FATAL_ERROR "default run failed (${ok_status}): ${ok_err}")
endif()
execute_process(COMMAND ${CLI} --d-out 7 --heads 2 RESULT_VARIABLE bad_status ERROR_VARIABLE bad_err)
if(NOT bad_status EQUAL 1 OR NOT bad_err MATCHES "must be divisible")
  message(FATAL_ERROR "bad input not refused cleanly (${bad_status}): ${bad_err}")
endif()
execute_process(COMMAND ${CLI} --tokenize --text "Every effort moves you" RESULT_VARIABLE tok_status
                OUTPUT_VARIABLE tok_out ERROR_VARIABLE tok_err)
if(NOT tok_status EQUAL 0 OR NOT tok_out STREQUAL "[6109,3626,6100,345]\n")
  message(FATAL_ERROR "--tokenize failed (${tok_status}): ${tok_out}${tok_err}")
endif()

# scripts/test runs the native suites again as on other machines: ATTNVIZ_MAX_ISA and ATTNVIZ_HARDWARE_THREADS
# must take effect, or those runs prove nothing.
execute_process(COMMAND ${CMAKE_COMMAND} -E env ATTNVIZ_MAX_ISA=scalar ${CLI} RESULT_VARIABLE isa_status
                OUTPUT_VARIABLE isa_out ERROR_VARIABLE isa_err)
if(NOT isa_status EQUAL 0 OR NOT isa_out MATCHES "computed with scalar kernels on 1 thread in")
  message(FATAL_ERROR "ATTNVIZ_MAX_ISA=scalar did not select the reference (${isa_status}): ${isa_out}${isa_err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env ATTNVIZ_HARDWARE_THREADS=3 ${CLI} --preset gpt2-small
                RESULT_VARIABLE hw_status
                OUTPUT_VARIABLE hw_out ERROR_VARIABLE hw_err)
if(NOT hw_status EQUAL 0 OR NOT hw_out MATCHES "(kernels on 3 threads|scalar kernels on 1 thread) in")
  message(FATAL_ERROR "ATTNVIZ_HARDWARE_THREADS=3 was not taken (${hw_status}): ${hw_out}${hw_err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env ATTNVIZ_MAX_ISA=avx ${CLI} RESULT_VARIABLE typo_status
                OUTPUT_VARIABLE typo_out ERROR_VARIABLE typo_err)
if(NOT typo_status EQUAL 0 OR NOT typo_err MATCHES "ATTNVIZ_MAX_ISA ignored: not one of")
  message(FATAL_ERROR "a misspelt ATTNVIZ_MAX_ISA was not reported (${typo_status}): ${typo_err}")
endif()

# Output that cannot be written is an error, not a silent truncation.
if(EXISTS /dev/full)
  execute_process(COMMAND ${CLI} --json OUTPUT_FILE /dev/full RESULT_VARIABLE full_status ERROR_VARIABLE full_err)
  if(NOT full_status EQUAL 1 OR NOT full_err MATCHES "cannot write the output")
    message(FATAL_ERROR "writing to /dev/full was not refused (${full_status}): ${full_err}")
  endif()
endif()

# Under an address-space limit (ulimit -v 1.5 GB) the budget is what the limit leaves, not the memory the
# machine has: a gpt2-xl layer at T = 1000 with --json (2.0 GB) is refused in one line instead of dying in
# bad_alloc. Sanitizers reserve terabytes of address space, so only plain builds run this.
if(NOT SANITIZED)
  set(words "")
  foreach(i RANGE 999)
    string(APPEND words "w${i} ")
  endforeach()
  execute_process(COMMAND sh -c "ulimit -v 1500000 && exec \"$0\" --preset gpt2-xl --json --text \"$1\""
                          ${CLI} "${words}"
                  RESULT_VARIABLE cap_status OUTPUT_VARIABLE cap_out ERROR_VARIABLE cap_err)
  if(NOT cap_status EQUAL 1 OR NOT cap_err MATCHES "^attnviz-cli: this configuration needs [^\n]* available")
    message(FATAL_ERROR "an address-space limit was not taken as the budget (${cap_status}): ${cap_err}")
  endif()
endif()
