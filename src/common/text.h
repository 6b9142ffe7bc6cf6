// Text that came from outside colo (a job's output, a file, a client) made safe to store, send
// and print: valid UTF-8 only, cut on code-point boundaries, control characters escaped before
// they reach a terminal.
#pragma once

#include <string>
#include <string_view>

namespace colo {

// `text` with every byte sequence that is not valid UTF-8 (stray continuation bytes, overlong
// forms, surrogates, code points above U+10FFFF, a sequence cut short) replaced by U+FFFD.
std::string ValidUtf8(std::string_view text);

// At most `max_bytes` of `text`, made valid first and cut before a code point that would not fit.
std::string TruncateUtf8(std::string_view text, size_t max_bytes);

// The last at most `max_bytes` of `text`, made valid, starting on a code-point boundary.
std::string TailUtf8(std::string_view text, size_t max_bytes);

// For a terminal: valid UTF-8 with C0 controls (but not tab), DEL, C1 controls and the Unicode
// bidirectional overrides written as \xNN or \u{NNNN}, so a job name cannot move the cursor,
// change colours or reorder what follows it.
std::string Printable(std::string_view text);

// The terminal columns `text` takes, counted as fmt counts them when it pads a field: two for
// each East Asian wide or fullwidth character and pictograph, one for any other code point.
size_t DisplayWidth(std::string_view text);

// A table cell of at most `columns` columns: `text` made printable, and when wider, cut on a
// code point with a '+' in its last column.
std::string FitColumns(std::string_view text, size_t columns);

}  // namespace colo
