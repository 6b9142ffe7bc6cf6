// The `colo` command line: subcommands and their wiring. main() only calls RunColo.
#pragma once

namespace colo {
int RunColo(int argc, char** argv);
}
