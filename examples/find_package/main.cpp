// SPDX-License-Identifier: MIT OR Apache-2.0
//
// consumer_cpp: the C++ side of the consumer. It allocates only through
// operator new (std::vector, std::string) and never calls malloc itself,
// so nothing but the culpert calls ties it to libculpert: culpert::culpert
// must keep the library linked where the linker drops libraries a program
// does not need (--as-needed, the default of Debian's and Ubuntu's GCC).
// It writes a snapshot to argv[1] and reports whether libculpert was
// active.
#include <culpert.h>

#include <cstdio>
#include <string>
#include <vector>

static size_t consumer_work()
{
  CULPERT_SPAN("consumer_work"); // closes at the end of the function, as in C
  std::vector<std::string> lines;
  for (int i = 0; i < 100; i++)
    lines.emplace_back(4096, 'x');
  return lines.size();
}

int main(int argc, char **argv)
{
  size_t n = consumer_work();
  int rc = argc > 1 ? culpert_snapshot_write(argv[1]) : 0;
  std::printf("active=%d snapshot=%d lines=%zu\n", culpert_is_active(), rc, n);
  return rc == 0 ? 0 : 1;
}
