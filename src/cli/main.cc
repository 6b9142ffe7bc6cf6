#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <exception>

#include "cli/app.h"

int main(int argc, char** argv) {
  int code = 0;
  try {
    code = colo::RunColo(argc, argv);
  } catch (const std::exception& e) {
    // Output that cannot be written (stdout on a full disk) makes fmt throw: an error to report
    // with exit 1, not a crash.
    fprintf(stderr, "colo: %s\n", e.what());
    return 1;
  }
  // What is still buffered may fail only now; a lost job id must not look like success.
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "colo: cannot write the output: %s\n", strerror(errno));
    return code == 0 ? 1 : code;
  }
  return code;
}
