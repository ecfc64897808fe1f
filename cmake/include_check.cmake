# cmake/include_check.cmake - the layering, checked by the includes (run with cmake -P).
#
# The linker check (CMakeLists.txt, "the layering") sees calls; this sees what a file includes:
# a module may include its own headers, its internal headers (DIR/x_internal.h, or a bare "x.h"
# of its own folder) and the headers of the modules it links (transitively), public or internal;
# a public header (include/sqz/X.h) may include only the public headers of the modules its owner
# links. cli/ is a client: public headers only. A violation fails the build with one line per
# include naming the file, the header and the module that may not see it.
#
#   cmake -DMANIFEST=build/sqz_layers.txt -DSRC=<source dir> [-DEXTRA=module:path] -P include_check.cmake
#
# MANIFEST (written by the root CMakeLists.txt at configure time), one row per line:
#   module|<name>|<dir relative to SRC>|<allowed module>,<allowed module>,...|<source>,<source>,...
#   header|sqz/<X>.h|<owning module>
# EXTRA adds one more file to a module's sources (the ctest layers_include_upward checks that a
# deliberate upward include fails).
cmake_minimum_required(VERSION 3.20)
if(NOT MANIFEST OR NOT SRC)
  message(FATAL_ERROR "include_check: -DMANIFEST=... -DSRC=... are required")
endif()
file(STRINGS "${MANIFEST}" rows)

set(modules "")
foreach(row IN LISTS rows)
  string(REPLACE "|" ";" f "${row}")
  list(GET f 0 kind)
  if(kind STREQUAL "module")
    list(GET f 1 m)
    list(GET f 2 dir)
    list(GET f 3 allowed)
    list(GET f 4 srcs)
    string(REPLACE "," ";" allowed "${allowed}")
    string(REPLACE "," ";" srcs "${srcs}")
    list(APPEND modules ${m})
    set(dir_${m} "${dir}")
    set(allowed_${m} ${m} ${allowed})
    set(srcs_${m} ${srcs})
    set(owner_dir_${dir} ${m})
  elseif(kind STREQUAL "header")
    list(GET f 1 h)
    list(GET f 2 m)
    set(owner_hdr_${h} ${m})
  endif()
endforeach()

if(EXTRA)
  string(REPLACE ":" ";" e "${EXTRA}")
  list(GET e 0 em)
  list(GET e 1 ep)
  list(APPEND srcs_${em} ${ep})
endif()

# The module owning an include path as written in `file` (in dir `fdir`), or "" if none; public
# headers go to *public to 1.
function(owner_of inc fdir out pub)
  set(${pub} 0 PARENT_SCOPE)
  if(inc MATCHES "^sqz/")
    if(NOT DEFINED owner_hdr_${inc})
      set(${out} "?unlisted public header" PARENT_SCOPE)
    else()
      set(${out} ${owner_hdr_${inc}} PARENT_SCOPE)
    endif()
    set(${pub} 1 PARENT_SCOPE)
    return()
  endif()
  if(NOT inc MATCHES "/")
    set(inc "${fdir}/${inc}")
  endif()
  get_filename_component(d "${inc}" DIRECTORY)
  while(d)
    if(DEFINED owner_dir_${d})
      set(${out} ${owner_dir_${d}} PARENT_SCOPE)
      return()
    endif()
    get_filename_component(d "${d}" DIRECTORY)
  endwhile()
  set(${out} "" PARENT_SCOPE)
endfunction()

set(bad "")
# Checks one file of module m (client: public headers only).
function(check_file m file client)
  if(NOT EXISTS "${SRC}/${file}")
    return()
  endif()
  file(STRINGS "${SRC}/${file}" incs REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  get_filename_component(fdir "${file}" DIRECTORY)
  foreach(line IN LISTS incs)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
    owner_of("${inc}" "${fdir}" o pub)
    if(o STREQUAL "" OR o STREQUAL m)
      continue() # its own, or a header of no module (tests, generated files)
    endif()
    if(client AND NOT pub)
      set(bad "${bad}${file}: includes \"${inc}\", an internal header of ${o}: ${m} uses the public API only\n" PARENT_SCOPE)
    elseif(NOT client AND NOT o IN_LIST allowed_${m})
      set(bad "${bad}${file}: includes \"${inc}\" of ${o}, which ${m} does not link (upward include)\n" PARENT_SCOPE)
    endif()
  endforeach()
endfunction()

foreach(m IN LISTS modules)
  set(client 0)
  if(m STREQUAL "cli")
    set(client 1)
  endif()
  file(GLOB hdrs RELATIVE "${SRC}" "${SRC}/${dir_${m}}/*.h" "${SRC}/${dir_${m}}/*.cuh")
  foreach(file IN LISTS srcs_${m} hdrs)
    check_file(${m} "${file}" ${client})
  endforeach()
endforeach()

# Public headers: what their owner may see, public headers only.
file(GLOB pub RELATIVE "${SRC}/include" "${SRC}/include/sqz/*.h")
foreach(h IN LISTS pub)
  if(NOT DEFINED owner_hdr_${h})
    set(bad "${bad}include/${h}: a public header no module owns: add it to SQZ_PUBLIC_HEADERS (CMakeLists.txt)\n")
    continue()
  endif()
  set(m ${owner_hdr_${h}})
  if(m STREQUAL "sqz")
    continue() # the umbrella header: everything
  endif()
  file(STRINGS "${SRC}/include/${h}" incs REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS incs)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
    owner_of("${inc}" "include/sqz" o pub_inc)
    if(NOT pub_inc)
      set(bad "${bad}include/${h}: includes \"${inc}\": a public header includes public headers only\n")
    elseif(NOT o IN_LIST allowed_${m})
      set(bad "${bad}include/${h}: includes \"${inc}\" of ${o}, which ${m} does not link (upward include)\n")
    endif()
  endforeach()
endforeach()

if(bad)
  # one line per include, not wrapped (FATAL_ERROR's text is), then the failure
  message(NOTICE "include check: the includes break the layering:\n${bad}")
  message(FATAL_ERROR "include check failed (cmake/include_check.cmake)")
endif()
