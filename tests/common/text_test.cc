#include "common/text.h"

#include <fmt/format.h>
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

TEST(Text, CellsAreFittedByTheColumnsTheyTakeNotByTheirBytes) {
  EXPECT_EQ(DisplayWidth("resnet"), 6u);
  EXPECT_EQ(DisplayWidth("réseau"), 6u);    // é: 2 bytes, 1 column
  EXPECT_EQ(DisplayWidth("训练任务"), 8u);  // wide: 3 bytes, 2 columns each
  EXPECT_EQ(DisplayWidth("🙂x"), 3u);     // a pictograph: 2 columns
  EXPECT_EQ(DisplayWidth("\xFF"), 1u);      // U+FFFD once made valid
  EXPECT_EQ(FitColumns("réseau-de-neurones", 8), "réseau-+");
  EXPECT_EQ(FitColumns("réseau", 6), "réseau");
  EXPECT_EQ(FitColumns("训练任务", 8), "训练任务");
  EXPECT_EQ(FitColumns("训练任务", 7), "训练任+");
  EXPECT_EQ(FitColumns("训练任务", 6), "训练+");  // a wide character never straddles the cut
  EXPECT_EQ(FitColumns("abc", 1), "+");
  EXPECT_EQ(FitColumns("abc", 0), "");
  EXPECT_EQ(FitColumns("\x1b[2J", 4), "\\x1+");  // made printable before it is measured
  // fmt pads by the same count, so a fitted cell fills its field exactly.
  EXPECT_EQ(DisplayWidth(fmt::format("{:<10}|", FitColumns("训练任务-resnet", 10))), 11u);
}

}  // namespace
}  // namespace colo
