# SPDX-License-Identifier: MIT
# redlease_embed_lua(<target> OUTPUT <header> SCRIPTS <file.lua>...)
# Generates a header with one `inline constexpr detail::lua_script` per file: its name, its text and the
# SHA1 of that text (the digest Redis computes for SCRIPT LOAD / EVALSHA). Editing a script rebuilds it.
# A script's line "-- #include NAME.lua" is replaced by include/NAME.lua from the script's folder.
set(_redlease_embed_script "${CMAKE_CURRENT_LIST_DIR}/redlease_embed_lua_gen.cmake")
function(redlease_embed_lua target)
  cmake_parse_arguments(ARG "" "OUTPUT" "SCRIPTS" ${ARGN})
  set(abs)
  foreach(s IN LISTS ARG_SCRIPTS)
    list(APPEND abs ${CMAKE_CURRENT_SOURCE_DIR}/${s})
  endforeach()
  string(REPLACE ";" "|" joined "${abs}")
  set(fragments)
  foreach(s IN LISTS abs)
    get_filename_component(dir ${s} DIRECTORY)
    file(GLOB found CONFIGURE_DEPENDS ${dir}/include/*.lua)
    list(APPEND fragments ${found})
  endforeach()
  list(REMOVE_DUPLICATES fragments)
  add_custom_command(OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUT=${ARG_OUTPUT} "-DSCRIPTS=${joined}" -P ${_redlease_embed_script}
    DEPENDS ${abs} ${fragments} ${_redlease_embed_script}
    COMMENT "Embedding Lua scripts" VERBATIM)
  add_custom_target(${target} DEPENDS ${ARG_OUTPUT})
endfunction()
