# SPDX-License-Identifier: MIT
# Writes the man page redlease.1 from the tool's own help: `redlease --help` and the `--help` of each
# subcommand it lists (hidden ones are not listed), so that the page says what the tool says and
# changes with it. No dependency but the tool: the help is CLI11's, laid out in a fixed column (30).
# Script mode: -DEXE=<the built redlease> -DOUT=<redlease.1> -DVERSION=<project version>
#
# The page: NAME and DESCRIPTION from the tool's first line and footer, SYNOPSIS from every Usage
# line, OPTIONS, a COMMANDS section with one subsection per subcommand (its arguments, options and
# footer), EXIT STATUS and ENVIRONMENT from the footer's paragraphs that begin so.
cmake_minimum_required(VERSION 3.25)
foreach(v EXE OUT VERSION)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "redlease_manpage.cmake: -D${v}=... is required")
  endif()
endforeach()

# CMake lists split at ';' and do not split inside [...]: both stand in as control characters until
# the page is written.
string(ASCII 1 _semi)
string(ASCII 2 _lbr)
string(ASCII 3 _rbr)

# help(<out> <args...>): the tool's help for <args> as a list of lines, the path it was run by
# replaced with "redlease".
function(help out)
  execute_process(COMMAND ${EXE} ${ARGN} --help RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "${EXE} ${ARGN} --help failed (${rc}): ${err}")
  endif()
  string(REPLACE "${EXE}" "redlease" text "${text}")
  string(REPLACE ";" "${_semi}" text "${text}")
  string(REPLACE "[" "${_lbr}" text "${text}")
  string(REPLACE "]" "${_rbr}" text "${text}")
  string(REGEX REPLACE "\n+$" "" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

# roff(<out> <text>): text escaped for roff (backslashes, minus signs: options must copy and paste as
# typed), and a line that would start with a control character protected.
function(roff out text)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  if(text MATCHES "^[.']")
    string(PREPEND text "\\&")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# parse(<prefix> <lines>): splits CLI11's help into <prefix>_desc (the lines before Usage),
# <prefix>_usage, <prefix>_sections (the section titles in order: Positionals, Options, Subcommands),
# <prefix>_<title as a C identifier> (its entries, each the line as printed, then a tab and the line below it when that
# continues it: see entry()) and <prefix>_footer (the lines after the sections).
function(parse prefix lines)
  set(state desc)
  set(desc "")
  set(usage "")
  set(sections "")
  set(footer "")
  set(section "")
  string(ASCII 9 tab)
  foreach(line IN LISTS lines)
    if(state STREQUAL "desc")
      if(line MATCHES "^Usage: (.*)$")
        set(usage "${CMAKE_MATCH_1}")
        set(state between)
      elseif(NOT line STREQUAL "")
        list(APPEND desc "${line}")
      endif()
    elseif(state STREQUAL "between" AND line STREQUAL "")
    elseif(state STREQUAL "between" AND line MATCHES "^([A-Z][A-Za-z ]*):$")
      list(APPEND sections "${CMAKE_MATCH_1}")
      string(MAKE_C_IDENTIFIER "${CMAKE_MATCH_1}" section)
      set(entries_${section} "")
      set(state section)
    elseif(state STREQUAL "section" AND line STREQUAL "")
      set(state between)
    elseif(state STREQUAL "section" AND line MATCHES "^                              +(.*)$")
      # A continuation: the description of the entry above, whose name filled the column (CLI11 puts
      # a description on the next line when the name takes 28 characters or more).
      list(POP_BACK entries_${section} last)
      list(APPEND entries_${section} "${last}${tab}${CMAKE_MATCH_1}")
    elseif(state STREQUAL "section" AND line MATCHES "^  [^ ]")
      list(APPEND entries_${section} "${line}")
    else()
      set(state footer)
      list(APPEND footer "${line}")
    endif()
  endforeach()
  set(${prefix}_desc "${desc}" PARENT_SCOPE)
  set(${prefix}_usage "${usage}" PARENT_SCOPE)
  set(${prefix}_sections "${sections}" PARENT_SCOPE)
  foreach(s IN LISTS sections)
    string(MAKE_C_IDENTIFIER "${s}" s)
    set(${prefix}_${s} "${entries_${s}}" PARENT_SCOPE)
  endforeach()
  set(${prefix}_footer "${footer}" PARENT_SCOPE)
endfunction()

# entry(<name> <description> <entry>): an entry of parse() split into the name (an option's
# spellings, type and exclusions; a positional's name and type; a subcommand) and its description.
# The description begins in column 30, or on the next line when the name is too long for the column
# (the help's descriptions have no line breaks of their own).
function(entry name_out desc_out e)
  string(ASCII 9 tab)
  string(FIND "${e}" "${tab}" t)
  if(t GREATER -1)
    string(SUBSTRING "${e}" 0 ${t} name)
    math(EXPR t "${t} + 1")
    string(SUBSTRING "${e}" ${t} -1 d)
  else()
    string(LENGTH "${e}" n)
    set(name "${e}")
    set(d "")
    if(n GREATER 30)
      string(SUBSTRING "${e}" 0 30 name)
      string(SUBSTRING "${e}" 30 -1 d)
    endif()
  endif()
  string(STRIP "${name}" name)
  set(${name_out} "${name}" PARENT_SCOPE)
  set(${desc_out} "${d}" PARENT_SCOPE)
endfunction()

# entries(<out> <entries>): .TP paragraphs: the name in bold up to its first space (an option's
# spellings, a positional's name), the rest (type, Excludes: ...) in roman.
function(entries out list)
  set(text "")
  foreach(e IN LISTS list)
    entry(name d "${e}")
    if(name MATCHES "^([^ ]+) (.*)$")
      roff(bold "${CMAKE_MATCH_1}")
      roff(rest "${CMAKE_MATCH_2}")
      string(APPEND text ".TP\n\\fB${bold}\\fR ${rest}\n")
    else()
      roff(bold "${name}")
      string(APPEND text ".TP\n\\fB${bold}\\fR\n")
    endif()
    roff(d "${d}")
    string(APPEND text "${d}\n")
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# paragraphs(<lines>): the footer's paragraphs, each a list of lines joined by a control character
# (4), in the variables paragraphs (their names: p0, p1...) and p<N>. A blank line ends a paragraph;
# so does a line that begins a new one ("Exit status:", "Form:", "RedLock:", "Environment:" ...).
# Indented lines (a table of actions) stay together in the paragraph they follow.
function(paragraphs lines)
  string(ASCII 4 sep)
  set(names "")
  set(cur "")
  set(n 0)
  foreach(line IN LISTS lines)
    set(flush FALSE)
    if(line STREQUAL "")
      set(flush TRUE)
    elseif(line MATCHES "^[A-Z][A-Za-z -]*( \\(|:)" AND NOT cur STREQUAL "")
      set(flush TRUE)
    endif()
    if(flush AND NOT cur STREQUAL "")
      set(p${n} "${cur}" PARENT_SCOPE)
      list(APPEND names p${n})
      math(EXPR n "${n} + 1")
      set(cur "")
    endif()
    if(NOT line STREQUAL "")
      if(cur STREQUAL "")
        set(cur "${line}")
      else()
        set(cur "${cur}${sep}${line}")
      endif()
    endif()
  endforeach()
  if(NOT cur STREQUAL "")
    set(p${n} "${cur}" PARENT_SCOPE)
    list(APPEND names p${n})
  endif()
  set(paragraphs "${names}" PARENT_SCOPE)
endfunction()

# paragraph(<out> <text>): one footer paragraph in roff: filled, but its indented lines kept as
# they are (no-fill).
function(paragraph out text)
  string(ASCII 4 sep)
  string(REPLACE "${sep}" ";" lines "${text}")
  set(r ".PP\n")
  set(nofill FALSE)
  foreach(line IN LISTS lines)
    if(line MATCHES "^ " AND NOT nofill)
      string(APPEND r ".nf\n")
      set(nofill TRUE)
    elseif(NOT line MATCHES "^ " AND nofill)
      string(APPEND r ".fi\n")
      set(nofill FALSE)
    endif()
    roff(l "${line}")
    string(APPEND r "${l}\n")
  endforeach()
  if(nofill)
    string(APPEND r ".fi\n")
  endif()
  set(${out} "${r}" PARENT_SCOPE)
endfunction()

help(top_lines)
parse(top "${top_lines}")
if(NOT top_Subcommands)
  message(FATAL_ERROR "${EXE} --help lists no subcommands")
endif()
list(JOIN top_desc " " summary)
string(REGEX REPLACE "^redlease: *" "" summary "${summary}")
roff(summary "${summary}")

set(synopsis "")
set(commands "")
set(command_list "")
foreach(e IN LISTS top_Subcommands)
  entry(sub brief "${e}")
  help(sub_lines ${sub})
  parse(s "${sub_lines}")
  roff(u "${s_usage}")
  string(APPEND synopsis "${u}\n")
  roff(brief "${brief}")
  string(APPEND command_list ".TP\n\\fB${sub}\\fR\n${brief}\n")
  string(APPEND commands ".SS \"redlease ${sub}\"\n")
  foreach(l IN LISTS s_desc)
    roff(l "${l}")
    string(APPEND commands "${l}\n")
  endforeach()
  string(APPEND commands ".PP\nUsage: ${u}\n")
  foreach(section IN LISTS s_sections)
    if(section STREQUAL "Positionals")
      string(APPEND commands ".PP\n\\fIArguments:\\fR\n")
    else()
      string(APPEND commands ".PP\n\\fI${section}:\\fR\n")
    endif()
    string(MAKE_C_IDENTIFIER "${section}" id)
    entries(t "${s_${id}}")
    string(APPEND commands ".RS\n${t}.RE\n")
  endforeach()
  paragraphs("${s_footer}")
  foreach(p IN LISTS paragraphs)
    paragraph(t "${${p}}")
    string(APPEND commands "${t}")
  endforeach()
endforeach()

# The top-level footer: its "Exit status" and "Environment" paragraphs are sections of their own.
set(description "")
set(exit_status "")
set(environment "")
paragraphs("${top_footer}")
foreach(p IN LISTS paragraphs)
  paragraph(t "${${p}}")
  if(${p} MATCHES "^Exit status")
    string(APPEND exit_status "${t}")
  elseif(${p} MATCHES "^Environment")
    string(APPEND environment "${t}")
  else()
    string(APPEND description "${t}")
  endif()
endforeach()

roff(top_usage "${top_usage}")
entries(top_options "${top_Options}")
set(page ".\\\" Generated from the tool's --help by cmake/redlease_manpage.cmake: edit the tool, not this.
.TH REDLEASE 1 \"\" \"redlease ${VERSION}\" \"User Commands\"
.\\\" No hyphenation, ragged right: URLs, option names and \$VARIABLES stay whole.
.nh
.ad l
.SH NAME
redlease \\- ${summary}
.SH SYNOPSIS
.nf
${top_usage}
${synopsis}.fi
.SH DESCRIPTION
\\fBredlease\\fR takes Redis locks from the shell, as \\fBflock\\fR(1) takes file locks: the
lock family of Redisson, shared with Java and C++ programs using the same names.
Each subcommand below has its own \\fB\\-\\-help\\fR.
${description}.SH OPTIONS
${top_options}.SH COMMANDS
${command_list}${commands}")
if(NOT exit_status STREQUAL "")
  string(APPEND page ".SH \"EXIT STATUS\"\n${exit_status}")
endif()
if(NOT environment STREQUAL "")
  string(APPEND page ".SH ENVIRONMENT\n${environment}")
endif()
string(APPEND page ".SH \"SEE ALSO\"
\\fBflock\\fR(1), \\fBredis\\-server\\fR(1), \\fBredis\\-cli\\fR(1); docs/cli.md and docs/deployment.md in
redlease's sources.
")
string(REPLACE "${_semi}" ";" page "${page}")
string(REPLACE "${_lbr}" "[" page "${page}")
string(REPLACE "${_rbr}" "]" page "${page}")
file(WRITE "${OUT}.tmp" "${page}")
file(RENAME "${OUT}.tmp" "${OUT}")
