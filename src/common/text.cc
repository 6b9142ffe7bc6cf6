#include "common/text.h"

#include <fmt/format.h>

namespace colo {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at text[i], or 0 if none starts there. Follows the table
// of well-formed sequences in the Unicode standard (no overlongs, no surrogates, ≤ U+10FFFF).
size_t ValidSequenceAt(std::string_view text, size_t i, char32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) {
    *code_point = b0;
    return 1;
  }
  size_t length;
  unsigned char low = 0x80, high = 0xBF;  // bounds of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) low = 0xA0;
    if (b0 == 0xED) high = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  char32_t cp = b0 & (0xFF >> (length + 1));
  for (size_t k = 1; k < length; ++k) cp = (cp << 6) | (byte(i + k) & 0x3F);
  *code_point = cp;
  return length;
}

// Code points a terminal draws two columns wide (the ranges fmt pads by).
struct Range {
  char32_t first, last;
};
constexpr Range kWide[] = {
    {0x1100, 0x115F},   {0x2329, 0x232A},   {0x2E80, 0x303E},   {0x3040, 0xA4CF},
    {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},   {0xFE10, 0xFE19},   {0xFE30, 0xFE6F},
    {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x1F300, 0x1F64F}, {0x1F900, 0x1F9FF},
    {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD},
};

size_t ColumnsOf(char32_t cp) {
  for (const Range& r : kWide) {
    if (cp >= r.first && cp <= r.last) return 2;
  }
  return 1;
}

}  // namespace

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp = 0;
    const size_t n = ValidSequenceAt(text, i, &cp);
    if (n == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string TruncateUtf8(std::string_view text, size_t max_bytes) {
  std::string valid = ValidUtf8(text);
  if (valid.size() <= max_bytes) return valid;
  size_t cut = max_bytes;
  // Back up to the first byte of the code point that straddles the cut.
  while (cut > 0 && (static_cast<unsigned char>(valid[cut]) & 0xC0) == 0x80) --cut;
  valid.resize(cut);
  return valid;
}

std::string TailUtf8(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) text.remove_prefix(text.size() - max_bytes);
  // Skip continuation bytes left over from a code point that began before the window.
  size_t skip = 0;
  while (skip < text.size() && skip < 3 && (static_cast<unsigned char>(text[skip]) & 0xC0) == 0x80)
    ++skip;
  text.remove_prefix(skip);
  return ValidUtf8(text);
}

std::string Printable(std::string_view text) {
  const std::string valid = ValidUtf8(text);
  std::string out;
  out.reserve(valid.size());
  size_t i = 0;
  while (i < valid.size()) {
    char32_t cp = 0;
    const size_t n = ValidSequenceAt(valid, i, &cp);  // always > 0: `valid` is valid
    const bool control = (cp < 0x20 && cp != '\t') || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F);
    const bool bidi = (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) ||
                      cp == 0x200E || cp == 0x200F || cp == 0x061C;
    if (control && cp < 0x80)
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    else if (control || bidi)
      out += fmt::format("\\u{{{:04x}}}", static_cast<unsigned>(cp));
    else
      out.append(valid, i, n);
    i += n;
  }
  return out;
}

size_t DisplayWidth(std::string_view text) {
  const std::string valid = ValidUtf8(text);
  size_t width = 0;
  size_t i = 0;
  while (i < valid.size()) {
    char32_t cp = 0;
    i += ValidSequenceAt(valid, i, &cp);  // always > 0: `valid` is valid
    width += ColumnsOf(cp);
  }
  return width;
}

std::string FitColumns(std::string_view text, size_t columns) {
  std::string printable = Printable(text);
  // One pass: where a cut would fall (whole code points leaving the last column for the '+'),
  // and whether the whole text fits.
  size_t width = 0, cut = 0;
  size_t i = 0;
  while (i < printable.size()) {
    char32_t cp = 0;
    i += ValidSequenceAt(printable, i, &cp);  // always > 0: `printable` is valid
    width += ColumnsOf(cp);
    if (width > columns) break;
    if (width < columns) cut = i;
  }
  if (width <= columns) return printable;
  if (columns == 0) return "";
  printable.resize(cut);
  return printable + "+";
}

}  // namespace colo
