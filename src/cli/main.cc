#include "cli/app.h"

int main(int argc, char** argv) {
  return colo::RunColo(argc, argv);
}
