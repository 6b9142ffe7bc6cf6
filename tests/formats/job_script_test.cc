// Job scripts: #COLO directives read like #SBATCH lines, strictly checked, and the #! line that
// runs a script which is not executable; hostile bytes give errors, never crashes.
#include "formats/job_script.h"

#include <gtest/gtest.h>

#include "common/text.h"

namespace colo {
namespace {

using std::string_literals::operator""s;

ScriptDirectives Parse(const std::string& text) {
  auto d = ParseJobScript(text, "job.sh");
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? *d : ScriptDirectives{};
}

// The error for `text`; it names the file and line and is safe to print.
std::string Error(const std::string& text, const std::string& origin = "job.sh") {
  auto d = ParseJobScript(text, origin);
  EXPECT_FALSE(d.ok()) << text;
  if (d.ok()) return "";
  const std::string& message = d.status().message();
  EXPECT_EQ(Printable(message), message) << "not printable as is: " << message;
  EXPECT_LE(message.size(), 400u);
  return message;
}

TEST(JobScript, DirectivesReadLikeSbatchLines) {
  const ScriptDirectives d = Parse(
      "#!/bin/bash\n#COLO --gpus=2 --mem=8GiB\n#COLO --share=mps --threads=50 --name=bert\n"
      "\n# a comment\n#COLO --smact=0.35\npython train.py\n#COLO --gpus=4\n");
  EXPECT_TRUE(d.any);
  EXPECT_EQ(d.gpus, 2);  // directives after the first command are ignored, as with #SBATCH
  EXPECT_EQ(d.memory, "8GiB");
  EXPECT_EQ(d.share, "mps");
  EXPECT_EQ(d.threads, 50);
  EXPECT_EQ(d.name, "bert");
  EXPECT_EQ(d.smact, 0.35);
}

TEST(JobScript, SlurmHabitsAreKeptAsWrittenForSubmitToRead) {
  const ScriptDirectives d = Parse(
      "#!/bin/sh\n#COLO --output=logs/%x-%j.out --error=\"err %j.txt\"\n"
      "#COLO --time=1:00:00 --array=0-9%2 --dependency=afterok:12\nrun\n");
  EXPECT_EQ(d.output, "logs/%x-%j.out");
  EXPECT_EQ(d.error, "err %j.txt");
  EXPECT_EQ(d.time_limit, "1:00:00");
  EXPECT_EQ(d.array, "0-9%2");
  EXPECT_EQ(d.dependency, "afterok:12");
  EXPECT_NE(Error("#COLO --output=\n"), "");
  EXPECT_NE(Error("#COLO --error=" + std::string(5000, 'x') + "\n").find("longer than"),
            std::string::npos);
}

TEST(JobScript, SbatchLinesGiveWhatColoHasAndNameTheRest) {
  const ScriptDirectives d = Parse(
      "#!/bin/bash\n#SBATCH -J bert --gres=gpu:2\n#SBATCH --time=2:00:00 -o out-%j.txt\n"
      "#SBATCH -e err.txt -a 0-3 -d afterok:7\n#SBATCH --partition=gpu -c 8\n"
      "#SBATCH --mem=32G  # host memory in Slurm\npython train.py\n#SBATCH --gpus=4\n");
  EXPECT_TRUE(d.any);
  EXPECT_EQ(d.name, "bert");
  EXPECT_EQ(d.gpus, 2);
  EXPECT_EQ(d.time_limit, "2:00:00");
  EXPECT_EQ(d.output, "out-%j.txt");
  EXPECT_EQ(d.error, "err.txt");
  EXPECT_EQ(d.array, "0-3");
  EXPECT_EQ(d.dependency, "afterok:7");
  EXPECT_FALSE(d.memory) << "Slurm's --mem is host memory, never colo's GPU memory";
  ASSERT_EQ(d.warnings.size(), 3u);
  EXPECT_NE(d.warnings[0].find("job.sh:5: #SBATCH --partition ignored: colo runs jobs on this"),
            std::string::npos)
      << d.warnings[0];
  EXPECT_NE(d.warnings[1].find("job.sh:5: #SBATCH -c ignored: colo does not allocate CPUs"),
            std::string::npos)
      << d.warnings[1];
  EXPECT_NE(d.warnings[2].find("#SBATCH --mem ignored: Slurm's --mem is host memory"),
            std::string::npos)
      << d.warnings[2];
}

TEST(JobScript, RequeueAndSignalFromColoAndSbatchLines) {
  ScriptDirectives d = Parse("#SBATCH --requeue --signal=B:USR1@120\nrun\n");
  EXPECT_EQ(d.requeue, true);
  EXPECT_EQ(d.signal, "B:USR1@120");
  EXPECT_TRUE(d.warnings.empty());
  d = Parse("#SBATCH --requeue\n#SBATCH --no-requeue --signal TERM\nrun\n");
  EXPECT_EQ(d.requeue, false);
  EXPECT_EQ(d.signal, "TERM");
  d = Parse("#SBATCH --no-requeue --signal=TERM\n#COLO --requeue --signal=USR2@30\nrun\n");
  EXPECT_EQ(d.requeue, true) << "#COLO lines win";
  EXPECT_EQ(d.signal, "USR2@30");
  auto bad = ParseJobScript("#COLO --requeue=yes\nrun\n", "job.sh");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--requeue takes no value"), std::string::npos);
}

TEST(JobScript, ColoLinesWinOverSbatchLines) {
  const ScriptDirectives d =
      Parse("#SBATCH --job-name=slurm-name -G a100:3 -t 10\n#COLO --name=colo-name\nrun\n");
  EXPECT_EQ(d.name, "colo-name");
  EXPECT_EQ(d.gpus, 3);
  EXPECT_EQ(d.time_limit, "10");
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_NE(d.warnings[0].find("the GPU type 'a100' is not chosen here"), std::string::npos);
}

TEST(JobScript, BadSbatchValuesAreErrors) {
  EXPECT_NE(Error("#SBATCH --gres=tpu:2\n").find("job.sh:1: #SBATCH --gres: colo has GPUs only"),
            std::string::npos);
  EXPECT_NE(Error("#SBATCH -G 0\n").find("not a number of GPUs"), std::string::npos);
  EXPECT_NE(Error("#SBATCH -J\n").find("-J needs a value"), std::string::npos);
  EXPECT_NE(Error("#SBATCH --job-name=\"a\x01b\"\n").find("control character"), std::string::npos);
}

TEST(JobScript, WithoutDirectivesNothingIsSet) {
  for (const std::string text : {"", "#!/bin/sh\necho hi\n", "python x.py\n#COLO --gpus=2\n",
                                 "#COLOR --gpus=2\n#COLONEL\n", "#COLO\n"}) {
    const ScriptDirectives d = Parse(text);
    EXPECT_FALSE(d.any) << text;
    EXPECT_FALSE(d.gpus || d.memory || d.share || d.name || d.threads || d.smact) << text;
  }
}

TEST(JobScript, LayoutsUsersWrite) {
  // CRLF endings, indentation, tabs, quotes around a value with blanks, a later value winning.
  const ScriptDirectives d = Parse(
      "#!/bin/bash\r\n#COLO --gpus=2\r\n  #COLO\t--name=\"bert large\"  --share='any'\r\n"
      "#COLO --gpus=3\r\necho\r\n");
  EXPECT_EQ(d.gpus, 3);
  EXPECT_EQ(d.name, "bert large");
  EXPECT_EQ(d.share, "any");
  EXPECT_EQ(Parse("#COLO --mem=1024TiB\n").memory, "1024TiB");  // exactly 1 PiB
  EXPECT_EQ(Parse("#COLO --smact=1 --threads=100 --gpus=64\n").smact, 1.0);
  EXPECT_EQ(Parse("#COLO --name=résumé-训练\n").name, "résumé-训练");
}

TEST(JobScript, BadValuesNameFileLineAndDirective) {
  const struct {
    std::string text, error;
  } cases[] = {
      {"#COLO --gpus=zero\n", "job.sh:1: --gpus must be an integer 1..64, got 'zero'"},
      {"#!/bin/sh\n\n#COLO --gpus=0\n", "job.sh:3: --gpus must be an integer 1..64, got '0'"},
      {"#COLO --gpus=65\n", "job.sh:1: --gpus must be an integer 1..64, got '65'"},
      {"#COLO --gpus=99999999999999999999999\n", "job.sh:1: --gpus must be an integer 1..64"},
      {"#COLO --gpus=2.5\n", "job.sh:1: --gpus must be an integer 1..64, got '2.5'"},
      {"#COLO --mem=0\n", "job.sh:1: --mem must be a memory size from 1 B to 1 PiB"},
      {"#COLO --mem=1025TiB\n",
       "job.sh:1: --mem must be a memory size from 1 B to 1 PiB (e.g. 8GiB), got "
       "'1025TiB'"},
      {"#COLO --mem=-5GiB\n", "job.sh:1: --mem must be"},
      {"#COLO --mem=8GB5\n", "job.sh:1: --mem must be"},
      {"#COLO --mem=nan\n", "job.sh:1: --mem must be"},
      {"#COLO --mem=1e400\n", "job.sh:1: --mem must be"},
      {"#COLO --share=gpu\n", "job.sh:1: --share must be mps, plain, exclusive or any, got 'gpu'"},
      {"#COLO --share=MPS\n", "job.sh:1: --share must be"},
      {"#COLO --threads=0\n", "job.sh:1: --threads must be an integer 1..100, got '0'"},
      {"#COLO --threads=101\n", "job.sh:1: --threads must be an integer 1..100, got '101'"},
      {"#COLO --smact=1.01\n", "job.sh:1: --smact must be a number 0..1, got '1.01'"},
      {"#COLO --smact=-0.1\n", "job.sh:1: --smact must be a number 0..1"},
      {"#COLO --smact=nan\n", "job.sh:1: --smact must be a number 0..1"},
      {"#COLO --name=\"  \"\n", "job.sh:1: --name is blank"},
      {"#COLO --name=" + std::string(257, 'n') + "\n", "job.sh:1: --name is longer than 256 bytes"},
      {"#COLO --memory=8GiB\n", "job.sh:1: unknown directive '--memory' (known: --gpus"},
      {"#COLO --gpus\n", "job.sh:1: --gpus needs a value (--gpus=VALUE)"},
      {"#COLO --gpus=\n", "job.sh:1: --gpus needs a value (--gpus=VALUE)"},
      {"#COLO gpus=2\n", "job.sh:1: 'gpus=2' is not a directive (--key=value)"},
      {"#COLO --name=\"bert\n", "job.sh:1: unterminated \" quote"},
      {"#COLO --gpus=1\n#COLO --gpus=1 --share=x\n", "job.sh:2: --share must be"},
  };
  for (const auto& c : cases) {
    const std::string error = Error(c.text);
    EXPECT_EQ(error.substr(0, c.error.size()), c.error) << c.text;
  }
}

TEST(JobScript, NamesMustPrintAsThemselves) {
  EXPECT_EQ(Error("#COLO --name=bad\xff\xfe\n"),
            "job.sh:1: --name must be valid UTF-8 without control characters, got "
            "'bad\xef\xbf\xbd\xef\xbf\xbd'");
  // A terminal escape, a right-to-left override, a C1 control and a quoted tab.
  EXPECT_EQ(Error("#COLO --name=\x1b[31mred\n"),
            "job.sh:1: --name has a control character in "
            "'\\x1b[31mred'");
  EXPECT_EQ(Error("#COLO --name=abc\xe2\x80\xae"
                  "cba\n"),
            "job.sh:1: --name must be valid UTF-8 without control characters, got "
            "'abc\\u{202e}cba'");
  EXPECT_NE(Error("#COLO --name=a\xc2\x85z\n").find("--name must be valid UTF-8"),
            std::string::npos);
  EXPECT_NE(Error("#COLO --name='a\tb'\n").find("--name has a control character"),
            std::string::npos);
}

TEST(JobScript, HostileBytes) {
  // A NUL would end a number early for the C parsers: refused wherever it is.
  EXPECT_EQ(Error("#COLO --gpus=2\0junk\n"s),
            "job.sh:1: --gpus has a control character in "
            "'2\\x00junk'");
  EXPECT_NE(Error("#COLO --mem=8GiB\0\n"s).find("--mem has a control character"),
            std::string::npos);
  // A NUL before any '#' is a command: the directives have ended.
  EXPECT_FALSE(Parse("\0#COLO --gpus=2\n"s).any);
  // A megabyte line: as a comment it is passed over, as a command it ends the directives, as a
  // directive it is refused without being quoted back whole.
  const std::string huge(1 << 20, 'x');
  EXPECT_EQ(Parse("#" + huge + "\n#COLO --gpus=2\n").gpus, 2);
  EXPECT_FALSE(Parse(huge + "\n#COLO --gpus=2\n").any);
  EXPECT_EQ(Error("#COLO --name=" + huge + "\n"), "job.sh:1: #COLO line longer than 4096 bytes");
  EXPECT_EQ(Error("#COLO --share=" + std::string(3000, 'y') + "\n"),
            "job.sh:1: --share must be mps, plain, exclusive or any, got '" + std::string(64, 'y') +
                "...'");
  // A long script of comments before its directives is read to the end of them.
  std::string comments;
  for (int i = 0; i < 100000; ++i) comments += "# comment\n";
  EXPECT_EQ(Parse(comments + "#COLO --threads=7\n").threads, 7);
  EXPECT_EQ(Error(comments + "#COLO --threads=700\n").substr(0, 14), "job.sh:100001:");
  // The origin is the caller's, but it is printed escaped too.
  EXPECT_EQ(Error("#COLO --gpus=x\n", "evil\x1b]0;t\x07.sh").substr(0, 26),
            "evil\\x1b]0;t\\x07.sh:1: --g");
}

TEST(ScriptInterpreter, FromTheShebangAsLinuxReadsIt) {
  const struct {
    std::string text;
    std::vector<std::string> argv;
  } cases[] = {
      {"#!/usr/bin/env python3\nimport torch\n", {"/usr/bin/env", "python3"}},
      {"#!/bin/bash -e\necho\n", {"/bin/bash", "-e"}},
      // Everything after the interpreter is one argument: env -S splits it itself.
      {"#!/usr/bin/env -S python3 -u\n", {"/usr/bin/env", "-S python3 -u"}},
      {"#! /bin/sh  \n", {"/bin/sh"}},
      {"#!/bin/bash\t-x\n", {"/bin/bash", "-x"}},
      {"#!/bin/bash\r\necho\r\n", {"/bin/bash"}},
      {"#!/bin/sh", {"/bin/sh"}},
      {"echo hi\n", {"/bin/sh"}},
      {"", {"/bin/sh"}},
      {"# !/bin/bash\n", {"/bin/sh"}},
      {"\n#!/bin/bash\n", {"/bin/sh"}},  // only the first line can be a #! line
  };
  for (const auto& c : cases) {
    auto argv = ScriptInterpreter(c.text, "job.sh");
    ASSERT_TRUE(argv.ok()) << c.text << ": " << argv.status().message();
    EXPECT_EQ(*argv, c.argv) << c.text;
  }
}

TEST(ScriptInterpreter, BadShebangsAreErrorsNamingTheFile) {
  const struct {
    std::string text, error;
  } cases[] = {
      {"#!\necho\n", "job.sh:1: empty #! line: no interpreter"},
      {"#!   \t\n", "job.sh:1: empty #! line: no interpreter"},
      {"#!python3\n", "job.sh:1: #! interpreter 'python3' is not an absolute path"},
      {"#!./run.sh arg\n", "job.sh:1: #! interpreter './run.sh' is not an absolute path"},
      {"#!/bin/ba\0sh\n"s,
       "job.sh:1: #! line must be valid UTF-8 without control characters, "
       "got '/bin/ba\\x00sh'"},
      {"#!/usr/bin/\xff\n", "job.sh:1: #! line must be valid UTF-8 without control characters"},
      {"#!/bin/sh \x1b[2J\n", "job.sh:1: #! line must be valid UTF-8 without control characters"},
      {"#!/usr/bin/env " + std::string(300, 'p') + "\n",
       "job.sh:1: #! line longer than the 255 bytes Linux reads"},
  };
  for (const auto& c : cases) {
    auto argv = ScriptInterpreter(c.text, "job.sh");
    ASSERT_FALSE(argv.ok()) << c.text;
    EXPECT_EQ(argv.status().message().substr(0, c.error.size()), c.error);
    EXPECT_EQ(Printable(argv.status().message()), argv.status().message());
  }
  // A megabyte #! line is refused; a megabyte script after a good one does not matter.
  EXPECT_FALSE(ScriptInterpreter("#!/bin/" + std::string(1 << 20, 'x'), "job.sh").ok());
  EXPECT_TRUE(ScriptInterpreter("#!/bin/sh\n" + std::string(1 << 20, '\0'), "job.sh").ok());
}

}  // namespace
}  // namespace colo
