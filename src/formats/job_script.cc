// Parsing of job scripts' #COLO directives and #! lines. See job_script.h.
#include "formats/job_script.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/strings.h"
#include "common/text.h"
#include "common/units.h"
#include "formats/slurm_options.h"

namespace colo {
namespace {

constexpr std::string_view kDirectivePrefix = "#COLO";
constexpr std::string_view kSbatchPrefix = "#SBATCH";
// No directive needs more: a longer #COLO line is a mistake, not something to read slowly.
constexpr size_t kMaxDirectiveLineBytes = 4096;
constexpr size_t kMaxNameBytes = 256;
constexpr int kMaxGpus = 64;
constexpr size_t kMaxTextValueBytes = 4096;
constexpr Bytes kMaxMemory = Bytes(int64_t{1} << 50);  // 1 PiB
// What Linux reads of a #! line (BINPRM_BUF_SIZE, less the newline).
constexpr size_t kMaxShebangBytes = 255;
// Warnings about #SBATCH options colo does not read, at most: the rest are counted.
constexpr size_t kMaxWarnings = 16;
// Of a value quoted back in an error message.
constexpr size_t kMaxQuotedBytes = 64;

bool IsBlank(char c) {
  return c == ' ' || c == '\t';
}

bool IsControl(char c) {
  return static_cast<unsigned char>(c) < 0x20 || c == 0x7F;
}

// `text` for an error message: bounded, valid UTF-8, controls escaped.
std::string Quote(std::string_view text) {
  std::string shown = TruncateUtf8(text, kMaxQuotedBytes);
  const bool cut = shown.size() < ValidUtf8(text).size();
  return "'" + Printable(shown) + (cut ? "...'" : "'");
}

// An option's name for a message: as it is when it prints so, else quoted like a value.
std::string QuoteName(std::string_view name) {
  return name.size() <= kMaxQuotedBytes && Printable(name) == name ? std::string(name)
                                                                   : Quote(name);
}

// Prints as itself: valid UTF-8 without control characters (tab included) or bidirectional
// overrides, so a name cannot move the cursor or reorder what a table shows after it.
bool IsPlainText(std::string_view text) {
  return text.find('\t') == std::string_view::npos && Printable(text) == text;
}

// The words of a directive line: split at blanks; a quoted run (no escapes inside) keeps its
// blanks and loses its quotes, as a shell would read it.
Result<std::vector<std::string>> DirectiveWords(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (const char c : text) {
    if (quote != 0) {
      if (c == quote)
        quote = 0;
      else
        word += c;
    } else if (IsBlank(c)) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      in_word = true;
      if (c == '"' || c == '\'')
        quote = c;
      else
        word += c;
    }
  }
  if (quote != 0) return InvalidArgument(fmt::format("unterminated {} quote", quote));
  if (in_word) words.push_back(std::move(word));
  return words;
}

Result<int> IntegerIn(std::string_view key, std::string_view value, int low, int high) {
  const auto n = ParseInt(value);
  if (!n.ok() || *n < low || *n > high)
    return InvalidArgument(
        fmt::format("{} must be an integer {}..{}, got {}", key, low, high, Quote(value)));
  return static_cast<int>(*n);
}

// Applies one `--key=value` word to `d`.
Status ApplyDirective(std::string_view word, ScriptDirectives* d) {
  const size_t eq = word.find('=');
  const std::string_view key = word.substr(0, eq);
  if (!key.starts_with("--"))
    return InvalidArgument(fmt::format("{} is not a directive (--key=value)", Quote(word)));
  static constexpr std::string_view kKnown[] = {
      "--gpus",  "--mem",  "--share", "--threads",    "--name",   "--smact",  "--output",
      "--error", "--time", "--array", "--dependency", "--signal", "--requeue"};
  if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
    return InvalidArgument(
        fmt::format("unknown directive {} (known: --gpus, --mem, --share, --threads, --name, "
                    "--smact, --output, --error, --time, --array, --dependency, --signal, "
                    "--requeue)",
                    Quote(key)));
  }
  if (key == "--requeue") {  // a flag
    if (eq != std::string_view::npos)
      return InvalidArgument("--requeue takes no value (#COLO --requeue)");
    d->requeue = true;
    d->any = true;
    return Status::Ok();
  }
  if (eq == std::string_view::npos || eq + 1 == word.size())
    return InvalidArgument(fmt::format("{} needs a value ({}=VALUE)", key, key));
  const std::string_view value = word.substr(eq + 1);
  // The number parsers read C strings: a NUL would end a number early and let the rest pass.
  if (std::any_of(value.begin(), value.end(), [](char c) { return IsControl(c); }))
    return InvalidArgument(fmt::format("{} has a control character in {}", key, Quote(value)));
  if (key == "--gpus") {
    auto n = IntegerIn(key, value, 1, kMaxGpus);
    if (!n.ok()) return n.status();
    d->gpus = *n;
  } else if (key == "--threads") {
    auto n = IntegerIn(key, value, 1, 100);
    if (!n.ok()) return n.status();
    d->threads = *n;
  } else if (key == "--mem") {
    const auto bytes = ParseBytes(std::string(value));
    if (!bytes.ok() || *bytes <= Bytes(0) || *bytes > kMaxMemory) {
      return InvalidArgument(fmt::format(
          "--mem must be a memory size from 1 B to 1 PiB (e.g. 8GiB), got {}", Quote(value)));
    }
    d->memory = std::string(value);
  } else if (key == "--share") {
    if (value != "mps" && value != "plain" && value != "exclusive" && value != "any") {
      return InvalidArgument(
          fmt::format("--share must be mps, plain, exclusive or any, got {}", Quote(value)));
    }
    d->share = std::string(value);
  } else if (key == "--name") {
    if (value.size() > kMaxNameBytes)
      return InvalidArgument(fmt::format("--name is longer than {} bytes", kMaxNameBytes));
    if (!IsPlainText(value)) {
      return InvalidArgument(fmt::format(
          "--name must be valid UTF-8 without control characters, got {}", Quote(value)));
    }
    if (Trim(value).empty()) return InvalidArgument("--name is blank");
    d->name = std::string(value);
  } else if (key == "--output" || key == "--error" || key == "--time" || key == "--array" ||
             key == "--dependency" || key == "--signal") {
    // Kept as written: `colo submit` reads each as its option of the same name.
    if (value.size() > kMaxTextValueBytes)
      return InvalidArgument(fmt::format("{} is longer than {} bytes", key, kMaxTextValueBytes));
    if (!IsPlainText(value))
      return InvalidArgument(fmt::format(
          "{} must be valid UTF-8 without control characters, got {}", key, Quote(value)));
    std::optional<std::string>& field = key == "--output"   ? d->output
                                        : key == "--error"  ? d->error
                                        : key == "--time"   ? d->time_limit
                                        : key == "--array"  ? d->array
                                        : key == "--signal" ? d->signal
                                                            : d->dependency;
    field = std::string(value);
  } else {  // --smact
    const auto x = ParseDouble(value);
    if (!x.ok() || *x < 0 || *x > 1)
      return InvalidArgument(fmt::format("--smact must be a number 0..1, got {}", Quote(value)));
    d->smact = *x;
  }
  d->any = true;
  return Status::Ok();
}

// sbatch's options that colo reads, and the #COLO directive each becomes.
struct SbatchOption {
  std::string_view short_name, long_name;
  std::string_view directive;  // empty: a GPU count (--gpus, --gres)
};
constexpr SbatchOption kSbatchOptions[] = {
    {"-J", "--job-name", "--name"},
    {"-G", "--gpus", ""},
    {"", "--gres", ""},
    {"-t", "--time", "--time"},
    {"-o", "--output", "--output"},
    {"-e", "--error", "--error"},
    {"-a", "--array", "--array"},
    {"-d", "--dependency", "--dependency"},
    {"", "--signal", "--signal"},
};

const SbatchOption* FindSbatchOption(std::string_view name) {
  for (const SbatchOption& o : kSbatchOptions) {
    if (name == o.long_name || (!o.short_name.empty() && name == o.short_name)) return &o;
  }
  return nullptr;
}

// The words of one #SBATCH line into `d` (what sbatch would take), warnings into `warnings`.
Status ApplySbatchWords(const std::vector<std::string>& words, std::string_view where,
                        ScriptDirectives* d, std::vector<std::string>* warnings) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word.starts_with("#")) break;  // a comment ends the line, as for sbatch
    if (word.size() < 2 || word[0] != '-') {
      warnings->push_back(fmt::format("{}: #SBATCH {} ignored: not an option", where, Quote(word)));
      continue;
    }
    // --name=value, --name value, -Xvalue, -X value
    std::string name = word, value;
    bool attached = false;
    if (word.starts_with("--")) {
      if (const size_t eq = word.find('='); eq != std::string::npos) {
        name = word.substr(0, eq);
        value = word.substr(eq + 1);
        attached = true;
      }
    } else if (word.size() > 2) {
      name = word.substr(0, 2);
      value = word.substr(word[2] == '=' ? 3 : 2);
      attached = true;
    }
    if ((name == "--requeue" || name == "--no-requeue") && !attached) {
      d->requeue = name == "--requeue";
      d->any = true;
      continue;
    }
    const SbatchOption* known = FindSbatchOption(name);
    const bool takes_value = known || SlurmOptionTakesValue(name) ||
                             (SlurmOptionHint(name).empty() && i + 1 < words.size() &&
                              !words[i + 1].starts_with("-") && !words[i + 1].starts_with("#"));
    if (!attached && takes_value && i + 1 < words.size()) {
      value = words[++i];
      attached = true;
    }
    if (!known) {
      const std::string_view hint = SlurmOptionHint(name);
      warnings->push_back(fmt::format("{}: #SBATCH {} ignored: {}", where, QuoteName(name),
                                      hint.empty() ? "colo has no such option" : hint));
      continue;
    }
    if (!attached || value.empty())
      return InvalidArgument(fmt::format("#SBATCH {} needs a value", QuoteName(name)));
    if (!known->directive.empty()) {
      if (Status s = ApplyDirective(fmt::format("{}={}", known->directive, value), d); !s.ok())
        return InvalidArgument(fmt::format("#SBATCH {}: {}", name, s.message()));
      continue;
    }
    std::string type;
    auto gpus = name == "--gres" ? ParseGpuGres(value, &type) : ParseGpuCount(value, &type);
    if (!gpus.ok()) return InvalidArgument(fmt::format("#SBATCH {}", gpus.status().message()));
    if (!type.empty())
      warnings->push_back(fmt::format(
          "{}: #SBATCH {}: the GPU type {} is not chosen here: colod places the job on any GPU "
          "with room",
          where, QuoteName(name), Quote(type)));
    d->gpus = *gpus;
    d->any = true;
  }
  return Status::Ok();
}

}  // namespace

Result<ScriptDirectives> ParseJobScript(std::string_view text, std::string_view origin) {
  ScriptDirectives d;
  ScriptDirectives slurm;  // what #SBATCH lines ask for: #COLO lines win
  size_t line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view raw = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    const std::string_view line = Trim(raw);  // CRLF endings and indentation
    if (line.empty()) continue;
    if (line[0] != '#') break;  // the first command ends the directives, as #SBATCH's
    // "#COLO" or "#SBATCH", then a blank or nothing: "#COLOR" is a comment.
    const auto is = [&](std::string_view prefix) {
      return line.starts_with(prefix) &&
             (line.size() == prefix.size() || IsBlank(line[prefix.size()]));
    };
    const bool sbatch = is(kSbatchPrefix);
    if (!sbatch && !is(kDirectivePrefix)) continue;
    const std::string where = fmt::format("{}:{}", Printable(origin), line_number);
    const auto fail = [&](std::string_view why) {
      return InvalidArgument(fmt::format("{}: {}", where, why));
    };
    if (line.size() > kMaxDirectiveLineBytes)
      return fail(fmt::format("{} line longer than {} bytes",
                              sbatch ? kSbatchPrefix : kDirectivePrefix, kMaxDirectiveLineBytes));
    auto words =
        DirectiveWords(line.substr(sbatch ? kSbatchPrefix.size() : kDirectivePrefix.size()));
    if (!words.ok()) return fail(words.status().message());
    if (sbatch) {
      if (Status s = ApplySbatchWords(*words, where, &slurm, &d.warnings); !s.ok())
        return fail(s.message());
      continue;
    }
    for (const std::string& word : *words) {
      if (const Status s = ApplyDirective(word, &d); !s.ok()) return fail(s.message());
    }
  }
  if (d.warnings.size() > kMaxWarnings) {
    const size_t more = d.warnings.size() - kMaxWarnings;
    d.warnings.resize(kMaxWarnings);
    d.warnings.push_back(
        fmt::format("{}: and {} more #SBATCH options ignored", Printable(origin), more));
  }
  // What only #SBATCH lines said.
  const auto fill = [](auto& field, const auto& from) {
    if (!field && from) field = from;
  };
  fill(d.gpus, slurm.gpus);
  fill(d.name, slurm.name);
  fill(d.output, slurm.output);
  fill(d.error, slurm.error);
  fill(d.time_limit, slurm.time_limit);
  fill(d.array, slurm.array);
  fill(d.dependency, slurm.dependency);
  fill(d.signal, slurm.signal);
  fill(d.requeue, slurm.requeue);
  d.any = d.any || slurm.any;
  return d;
}

Result<std::vector<std::string>> ScriptInterpreter(std::string_view text, std::string_view origin) {
  if (!text.starts_with("#!")) return std::vector<std::string>{"/bin/sh"};
  const auto fail = [&](std::string_view why) {
    return InvalidArgument(fmt::format("{}:1: {}", Printable(origin), why));
  };
  std::string_view line = text.substr(0, text.find('\n'));
  if (line.size() > kMaxShebangBytes)
    return fail(fmt::format("#! line longer than the {} bytes Linux reads", kMaxShebangBytes));
  line.remove_prefix(2);
  if (line.ends_with('\r')) line.remove_suffix(1);  // saved with CRLF: the kernel would fail it
  // Linux: blanks around the interpreter are skipped; what follows it, trimmed, is one argument.
  while (!line.empty() && IsBlank(line.front())) line.remove_prefix(1);
  while (!line.empty() && IsBlank(line.back())) line.remove_suffix(1);
  size_t split = 0;
  while (split < line.size() && !IsBlank(line[split])) ++split;
  const std::string_view interpreter = line.substr(0, split);
  std::string_view argument = line.substr(split);
  while (!argument.empty() && IsBlank(argument.front())) argument.remove_prefix(1);
  if (interpreter.empty()) return fail("empty #! line: no interpreter");
  // The command travels as JSON text and is shown to people (a tab inside the argument is
  // harmless).
  if (Printable(interpreter) != interpreter || Printable(argument) != argument)
    return fail(
        fmt::format("#! line must be valid UTF-8 without control characters, got {}", Quote(line)));
  if (interpreter.front() != '/') {
    return fail(fmt::format("#! interpreter {} is not an absolute path", Quote(interpreter)));
  }
  std::vector<std::string> argv = {std::string(interpreter)};
  if (!argument.empty()) argv.emplace_back(argument);
  return argv;
}

}  // namespace colo
