// libFuzzer target: the text helpers of common/text.h. Input: two bytes of a byte limit, then the
// text. Every output is valid UTF-8 and within its bound; valid input is kept as it is.
#include <string>

#include "common/check.h"
#include "common/text.h"
#include "fuzz_util.h"

namespace {

using colo::fuzz::IsValidUtf8;

// Decodes valid UTF-8 (checked before) and tells whether any code point is one Printable must
// escape: C0 controls but tab, DEL, C1 controls, bidirectional controls.
bool HasUnescapedControl(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    char32_t cp = length == 1 ? lead : lead & (0x7F >> length);
    for (size_t k = 1; k < length; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    if ((cp < 0x20 && cp != '\t') || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) ||
        (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200E ||
        cp == 0x200F || cp == 0x061C)
      return true;
    i += length;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t max_bytes = (data[0] | (data[1] << 8)) % 1024;
  const std::string_view text = colo::fuzz::AsText(data + 2, size - 2);
  const bool valid_input = IsValidUtf8(text);

  const std::string valid = colo::ValidUtf8(text);
  COLO_CHECK(IsValidUtf8(valid));
  COLO_CHECK(valid.size() <= 3 * text.size());  // each bad byte becomes U+FFFD at most
  COLO_CHECK(!valid_input || valid == text);
  COLO_CHECK(colo::ValidUtf8(valid) == valid);

  const std::string cut = colo::TruncateUtf8(text, max_bytes);
  COLO_CHECK(IsValidUtf8(cut));
  COLO_CHECK(cut.size() <= max_bytes);
  COLO_CHECK(valid.starts_with(cut));
  // Only a code point that would not fit whole is left out.
  COLO_CHECK(cut.size() == valid.size() || cut.size() + 4 > max_bytes);

  // TailUtf8 reads the last max_bytes of the input; replacing bad bytes can grow them threefold.
  const std::string tail = colo::TailUtf8(text, max_bytes);
  COLO_CHECK(IsValidUtf8(tail));
  COLO_CHECK(tail.size() <= 3 * max_bytes);
  if (valid_input) {
    COLO_CHECK(tail.size() <= max_bytes && text.ends_with(tail));
    COLO_CHECK(tail.size() == text.size() || tail.size() + 4 > max_bytes);
  }

  const std::string printable = colo::Printable(text);
  COLO_CHECK(IsValidUtf8(printable));
  COLO_CHECK(!HasUnescapedControl(printable));
  COLO_CHECK(printable.size() <= 4 * text.size());  // "\x01" for one byte, "\u{0085}" for two
  return 0;
}
