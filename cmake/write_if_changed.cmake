# write_if_changed(PATH TEXT): writes TEXT to PATH unless PATH already holds
# it, so that a generated source that did not change recompiles nothing.
function(write_if_changed path text)
  set(old "")
  if(EXISTS ${path})
    file(READ ${path} old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE ${path} "${text}")
  endif()
endfunction()
