// `lathe man`: the lathe(1) manual page in roff, generated from the top-level command list and each
// command line's spec (command_specs.h), so it says what --help says. `lathe man | man -l -` reads it.
#include <cstdio>
#include <string>

#include "lathe/cli/command_line.h"
#include "lathe/cli/command_specs.h"
#include "lathe/cli/commands.h"
#include "lathe/core/error.h"
#include "lathe/core/version.h"

namespace lathe::cli {
namespace {

// Text safe in roff: backslashes doubled, hyphens as \-, and a line starting with . or ' escaped.
std::string roff(const std::string& text) {
  std::string escaped;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) escaped += "\\&";
    line_start = c == '\n';
    if (c == '\\')
      escaped += "\\e";
    else if (c == '-')
      escaped += "\\-";
    else
      escaped += c;
  }
  return escaped;
}

std::string manual_page(const std::vector<CommandSpec>& specs) {
  std::string page = str_cat(".TH LATHE 1 \"\" \"", roff(lathe_version_line()), "\" \"User Commands\"\n.nh\n");
  page +=
      ".SH NAME\n"
      "lathe \\- train and run large language models on CPUs with lathe's own kernel library\n"
      ".SH SYNOPSIS\n"
      ".B lathe\n"
      ".I COMMAND\n"
      "[\\fIoptions\\fR]\n"
      ".br\n"
      ".B lathe \\-\\-version\n"
      ".br\n"
      ".B lathe \\-\\-help\n"
      ".SH DESCRIPTION\n"
      "One binary with subcommands. Every command takes \\fB\\-h\\fR/\\fB\\-\\-help\\fR and the runtime options\n"
      "\\fB\\-\\-threads\\fR, \\fB\\-\\-isa\\fR, \\fB\\-\\-pin\\fR, \\fB\\-\\-tuning\\-cache\\fR and "
      "\\fB\\-\\-no\\-tuning\\-cache\\fR.\n"
      "Options are \\fB\\-\\-name value\\fR or \\fB\\-\\-name=value\\fR; \\fB\\-\\-\\fR ends the options;\n"
      "\\fB\\-\\fR reads standard input where a command reads a file.\n"
      ".SS Commands\n";
  for (const Command& command : all_commands())
    page += str_cat(".TP\n.B ", roff(command.name), "\n", roff(command.summary), "\n");
  page += ".SH COMMANDS\n";
  for (const CommandSpec& spec : specs) {
    const CommandLine& command_line = spec.command_line;
    page += str_cat(".SS \"lathe ", roff(spec.path), "\"\n.nf\n", roff(command_line.usage()), "\n.fi\n.PP\n",
                    roff(command_line.description()), "\n");
    if (!command_line.positional_name().empty())
      page +=
          str_cat(".TP\n.I ", roff(command_line.positional_name()), "\n", roff(command_line.positional_help()), "\n");
    for (const auto& option : command_line.options()) {
      // str_cat, not "literal" + std::string&&: GCC 12 warns on that (-Wrestrict, a false positive).
      page += str_cat(".TP\n.B \\-\\-", roff(option.name));
      if (option.name == "help") page += ", \\-h";
      if (!option.is_flag) page += str_cat(" \\fI", roff(option.value_name), "\\fR");
      page += str_cat("\n", roff(option.help));
      if (!option.fallback.empty()) page += str_cat(" (default: ", roff(option.fallback), ")");
      if (option.is_repeated) page += " (repeatable)";
      page += "\n";
    }
  }
  page +=
      ".SH ENVIRONMENT\n"
      ".TP\n.B LATHE_NUM_THREADS\n"
      "worker threads. Precedence: \\fB\\-\\-threads\\fR, then LATHE_NUM_THREADS, then a config's train.threads,\n"
      "then the CPUs the process may run on (its affinity mask: taskset, cgroups, Slurm).\n"
      ".TP\n.B LATHE_ISA\n"
      "highest instruction set to use (scalar, avx2, avx512, avx512_bf16), as \\fB\\-\\-isa\\fR.\n"
      ".TP\n.B LATHE_TUNING_CACHE\n"
      "the tuning cache file (default ~/.cache/lathe/tuning.json), as \\fB\\-\\-tuning\\-cache\\fR.\n"
      ".SH \"EXIT STATUS\"\n"
      "0 on success; 1 when a check fails (a regression, a tolerance); 2 on a usage or input error (one line\n"
      "on stderr); 3 when out of memory; 128+N when stopped by signal N.\n"
      ".SH \"SEE ALSO\"\n"
      "The README and docs/ of the lathe source tree; \\fBlathe completion\\fR for shell completion.\n";
  return page;
}

}  // namespace

int run_man(int argc, char** argv) {
  CommandLine command_line("lathe man",
                           "Prints the lathe(1) manual page (roff), generated from every command's --help.\n"
                           "Read it with `lathe man | man -l -`; installed builds ship it as share/man/man1/lathe.1.");
  add_runtime_options(command_line);  // accepted as by every command; nothing here uses them
  if (!command_line.parse(argc, argv)) return 0;
  const std::string page = manual_page(all_command_specs());
  std::fwrite(page.data(), 1, page.size(), stdout);
  return 0;
}

}  // namespace lathe::cli
