# Runs the built attnviz without a display: it must say so in one line (GLFW's own error folded into it) and
# exit 1, not print GLFW's line and then its own.
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=DISPLAY --unset=WAYLAND_DISPLAY ${APP} --screenshot
                        ${CMAKE_CURRENT_BINARY_DIR}/no-display.png
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "\n" lines "${err}")
list(LENGTH lines line_count)
if(NOT status EQUAL 1 OR NOT line_count EQUAL 1 OR NOT err MATCHES "^attnviz: cannot open a window: no display")
  message(FATAL_ERROR "no display: expected one line and exit 1, got ${status} and ${line_count} lines: ${err}")
endif()
