// What the fuzz targets share: the input as text, and a UTF-8 check written independently of
// common/text.cc (it decodes, then checks the code point), so a bug there cannot hide itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace colo::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return size == 0 ? std::string_view()
                   : std::string_view(reinterpret_cast<const char*>(data), size);
}

inline bool IsValidUtf8(std::string_view s) {
  static constexpr uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};  // by continuation bytes
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    size_t more;
    uint32_t cp;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      more = 1;
      cp = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      more = 2;
      cp = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      more = 3;
      cp = lead & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= more) return false;
    for (size_t k = 1; k <= more; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < kSmallest[more] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += more + 1;
  }
  return true;
}

}  // namespace colo::fuzz
