# Writes OUTPUT: a C++ file defining `std::string NAME()` that returns INPUT's bytes. The text is
# split into raw string literals of at most 60000 bytes each (ISO C++ compilers need support
# only 65536 per literal, and -Wpedantic says so).
file(READ "${INPUT}" content)
string(FIND "${content}" ")embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the literal's delimiter")
endif()
string(LENGTH "${content}" length)
set(out "// Generated from ${INPUT} by embed_file.cmake.\n#include <string>\n\nnamespace colo {\n\nstd::string ${NAME}() {\n  static const char* const parts[] = {\n")
set(offset 0)
while(offset LESS length)
  string(SUBSTRING "${content}" ${offset} 60000 part)
  string(APPEND out "      R\"embed(${part})embed\",\n")
  math(EXPR offset "${offset} + 60000")
endwhile()
string(APPEND out "  };\n  std::string text;\n  for (const char* part : parts) text += part;\n  return text;\n}\n\n}  // namespace colo\n")
file(WRITE "${OUTPUT}" "${out}")
