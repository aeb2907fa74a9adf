# Copies the dashboard's chart library (uPlot's IIFE build and stylesheet) from SRC to DST at
# build time; a missing file is reported, not fatal (the C++ build does not need Node).
foreach(f uPlot.iife.min.js uPlot.min.css)
  if(EXISTS "${SRC}/${f}")
    file(COPY_FILE "${SRC}/${f}" "${DST}/${f}" ONLY_IF_DIFFERENT)
  else()
    message(WARNING "streamvec: ${SRC}/${f} is missing (scripts/install-deps runs npm ci)")
  endif()
endforeach()
