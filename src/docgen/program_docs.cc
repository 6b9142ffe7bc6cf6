#include "docgen/program_docs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace colo {
namespace {

bool Shown(const CLI::Option* o) {
  return !o->get_group().empty();
}

std::vector<const CLI::Option*> Options(const CLI::App& app) {
  return app.get_options([](const CLI::Option* o) { return Shown(o); });
}

std::vector<const CLI::App*> Commands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); });
}

// Every name an option answers to: -f, --follow.
std::vector<std::string> Names(const CLI::Option* o) {
  std::vector<std::string> names;
  for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  return names;
}

bool TakesValue(const CLI::Option* o) {
  return o->get_expected_max() > 0 && o->get_type_size() > 0;
}

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

// Text for roff: backslashes and hyphens escaped, no line starting with a control character.
std::string Roff(std::string_view text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\')
      out += "\\e";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
    line_start = c == '\n';
  }
  return out;
}

std::string ManOptions(const CLI::App& app) {
  std::string out;
  for (const CLI::Option* o : Options(app)) {
    // Every command has -h; the page says so once, for the program.
    if (app.get_parent() && o->check_lname("help")) continue;
    std::string head;
    if (o->nonpositional()) {
      for (const std::string& n : Names(o))
        head += (head.empty() ? "" : ", ") + ("\\fB" + Roff(n) + "\\fR");
      // The value's kind alone: CLI11 appends its checks ("INT:INT in [1 - 64]").
      if (TakesValue(o)) {
        const std::string type = o->get_type_name();
        head += " \\fI" + Roff(Upper(type.substr(0, type.find_first_of(": ")))) + "\\fR";
      }
    } else {
      head = "\\fI" + Roff(o->get_name(true)) + "\\fR";
    }
    out += ".TP\n" + head + "\n" + Roff(o->get_description()) + "\n";
  }
  return out;
}

std::string Paragraphs(std::string_view text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    // Indented lines (tables in footers) stay as they are.
    if (!line.empty() && line[0] == ' ')
      out += ".nf\n" + Roff(line) + "\n.fi\n";
    else if (!line.empty())
      out += Roff(line) + "\n";
    else
      out += ".PP\n";
    start = end + 1;
  }
  return out;
}

// A term and its meaning per entry (.TP), the term in bold.
std::string Entries(const ManPage::Entries& entries) {
  std::string out;
  for (const auto& [term, meaning] : entries)
    out += ".TP\n\\fB" + Roff(term) + "\\fR\n" + Roff(meaning) + "\n";
  return out;
}

std::string Man(const CLI::App& app, const ManPage& page) {
  const std::string name = app.get_name();
  std::string out = fmt::format(".TH {} {} \"\" \"{}\" \"User Commands\"\n", Upper(name),
                                name == "colod" ? 8 : 1, name);
  std::string summary = app.get_description();
  if (summary.rfind(name + ": ", 0) == 0) summary = summary.substr(name.size() + 2);
  out += ".SH NAME\n" + Roff(name) + " \\- " + Roff(summary) + "\n";
  out += ".SH SYNOPSIS\n.B " + Roff(name) + "\n[\\fIOPTIONS\\fR]";
  out += Commands(app).empty() ? "\n" : " \\fICOMMAND\\fR [\\fIARGS\\fR]\n";
  out += ".SH DESCRIPTION\n" + Paragraphs(page.description);
  out += ".SH OPTIONS\n" + ManOptions(app);
  if (!Commands(app).empty()) {
    out += ".SH COMMANDS\n";
    for (const CLI::App* sub : Commands(app)) {
      out += ".SS \"" + Roff(name + " " + sub->get_name()) + "\"\n";
      out += Roff(sub->get_description()) + "\n";
      out += ManOptions(*sub);
      if (!sub->get_footer().empty()) out += ".PP\n" + Paragraphs(sub->get_footer());
    }
  }
  if (!app.get_footer().empty()) out += ".SH NOTES\n" + Paragraphs(app.get_footer());
  if (!page.examples.empty()) out += ".SH EXAMPLES\n" + Entries(page.examples);
  if (!page.environment.empty()) out += ".SH ENVIRONMENT\n" + Entries(page.environment);
  if (!page.files.empty()) out += ".SH FILES\n" + Entries(page.files);
  if (!page.exit_status.empty()) out += ".SH EXIT STATUS\n" + Entries(page.exit_status);
  if (!page.see_also.empty()) out += ".SH SEE ALSO\n" + Paragraphs(page.see_also);
  return out;
}

std::string Words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::vector<std::string> OptionWords(const CLI::App& app) {
  std::vector<std::string> words = {"--help"};
  for (const CLI::Option* o : Options(app))
    for (const std::string& n : Names(o))
      if (n != "-h" && n != "--help") words.push_back(n);
  return words;
}

std::string Identifier(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

std::string Bash(const CLI::App& app) {
  const std::string name = app.get_name();
  const std::string fn = "_" + Identifier(name);
  std::vector<std::string> commands;
  for (const CLI::App* sub : Commands(app)) commands.push_back(sub->get_name());
  std::string out = fmt::format("# bash completion for {} (generated from its options)\n", name);
  out += fn + "() {\n  local cur=\"${COMP_WORDS[COMP_CWORD]}\" command=\"\" i\n";
  out += "  for ((i = 1; i < COMP_CWORD; i++)); do\n    case \"${COMP_WORDS[i]}\" in\n";
  if (!commands.empty()) {
    std::string alternatives;
    for (const std::string& c : commands) alternatives += (alternatives.empty() ? "" : "|") + c;
    out += "      " + alternatives + ") command=\"${COMP_WORDS[i]}\"; break ;;\n";
  }
  out += "    esac\n  done\n  local words\n  case \"$command\" in\n";
  for (const CLI::App* sub : Commands(app))
    out += fmt::format("    {}) words=\"{}\" ;;\n", sub->get_name(), Words(OptionWords(*sub)));
  std::vector<std::string> top = commands;
  for (const std::string& w : OptionWords(app)) top.push_back(w);
  out += fmt::format("    *) words=\"{}\" ;;\n  esac\n", Words(top));
  out += "  if [[ -z \"$command\" || \"$cur\" == -* ]]; then\n";
  out += "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n";
  out += "  else\n    COMPREPLY=($(compgen -f -- \"$cur\"))\n  fi\n}\n";
  out += fmt::format("complete -F {} {}\n", fn, name);
  return out;
}

// For zsh's _arguments: "--name[help]" with brackets and colons escaped.
std::string ZshSpec(const CLI::Option* o, const std::string& n) {
  std::string help;
  for (char c : o->get_description()) {
    if (c == '[' || c == ']' || c == ':' || c == '\\') help += '\\';
    if (c == '\'') {
      help += "'\\''";
      continue;
    }
    help += c == '\n' ? ' ' : c;
  }
  return "'" + n + "[" + help + "]" + (TakesValue(o) ? ":value:" : "") + "'";
}

std::string ZshArguments(const CLI::App& app) {
  std::string out;
  for (const CLI::Option* o : Options(app))
    for (const std::string& n : Names(o)) out += " \\\n    " + ZshSpec(o, n);
  return out;
}

std::string Zsh(const CLI::App& app) {
  const std::string name = app.get_name();
  const std::string fn = "_" + Identifier(name);
  std::string out = fmt::format(
      "#compdef {}\n# zsh completion for {} (generated from its options)\n", name, name);
  out += fn + "() {\n";
  if (Commands(app).empty()) {
    out += "  _arguments -s" + ZshArguments(app) + "\n}\n";
  } else {
    out += "  local -a commands\n  commands=(\n";
    for (const CLI::App* sub : Commands(app)) {
      std::string help;
      for (char c : sub->get_description()) {
        if (c == ':') help += '\\';
        if (c == '\'') {
          help += "'\\''";
          continue;
        }
        help += c;
      }
      out += "    '" + sub->get_name() + ":" + help + "'\n";
    }
    out += "  )\n  if (( CURRENT == 2 )); then\n    _describe command commands\n    return\n  fi\n";
    out += "  case \"${words[2]}\" in\n";
    for (const CLI::App* sub : Commands(app))
      // The subcommand's words only: _arguments takes the first as the command's name.
      out += "    " + sub->get_name() + ")\n      shift words\n      (( CURRENT-- ))\n" +
             "      _arguments -s" + ZshArguments(*sub) + " \\\n    '*:file:_files'\n      ;;\n";
    out += "  esac\n}\n";
  }
  out += fn + " \"$@\"\n";
  return out;
}

}  // namespace

std::string GenerateDoc(const CLI::App& app, std::string_view format, const ManPage& page) {
  if (format == "man") return Man(app, page);
  if (format == "bash") return Bash(app);
  return Zsh(app);
}

}  // namespace colo
