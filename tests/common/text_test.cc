#include "common/text.h"

#include <gtest/gtest.h>

namespace colo {
namespace {

TEST(Text, ValidUtf8KeepsGoodTextAndReplacesEveryBadSequence) {
  EXPECT_EQ(ValidUtf8("plain ascii"), "plain ascii");
  EXPECT_EQ(ValidUtf8("ümlaut €uro 🙂"), "ümlaut €uro 🙂");
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(ValidUtf8("a\xFF"
                      "b"),
            "a" + fffd + "b");                                           // never valid
  EXPECT_EQ(ValidUtf8("\x80"), fffd);                                    // stray continuation
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), fffd + fffd);                         // overlong '/'
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), fffd + fffd + fffd);              // a surrogate
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);   // above U+10FFFF
  EXPECT_EQ(ValidUtf8("progress \xE2\x96"), "progress " + fffd + fffd);  // cut mid-character
  EXPECT_EQ(ValidUtf8(std::string("nul\0in", 6)), std::string("nul\0in", 6));
}

TEST(Text, TruncationAndTailsCutOnCodePointBoundaries) {
  const std::string bar = "██████";  // 3 bytes each
  EXPECT_EQ(TruncateUtf8(bar, 7), "██");
  EXPECT_EQ(TruncateUtf8(bar, 6), "██");
  EXPECT_EQ(TruncateUtf8(bar, 100), bar);
  EXPECT_EQ(TruncateUtf8("abc", 0), "");
  EXPECT_EQ(TailUtf8(bar, 7), "██");  // the partial first character is dropped, not replaced
  EXPECT_EQ(TailUtf8("ok", 10), "ok");
  EXPECT_EQ(TailUtf8("x\xE2\x96", 10), "x\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Text, PrintableEscapesWhatATerminalWouldObey) {
  EXPECT_EQ(Printable("train-resnet"), "train-resnet");
  EXPECT_EQ(Printable("\x1b[2J\x1b]0;owned\x07"), "\\x1b[2J\\x1b]0;owned\\x07");
  EXPECT_EQ(Printable("a\tb\nc\rd\x7f"), "a\tb\\x0ac\\x0dd\\x7f");
  EXPECT_EQ(Printable("\xC2\x9B"
                      "31m"),
            "\\u{009b}31m");                                              // the C1 CSI
  EXPECT_EQ(Printable("abc\xE2\x80\xAEgpj.exe"), "abc\\u{202e}gpj.exe");  // right-to-left override
  EXPECT_EQ(Printable("bad\xFF"), "bad\xEF\xBF\xBD");
}

}  // namespace
}  // namespace colo
