// SPDX-License-Identifier: MIT OR Apache-2.0
// wl_cxx_names: inlined C++ functions that GCC's DWARF names without a
// linkage name (templates of a lambda defined in main, the lambda's own
// operator()), built with -O2. The profile must name them qualified by
// their namespaces, classes and enclosing function.
#include <cstdio>
#include <thread>
#include <vector>

namespace shop
{
template <typename F> struct Basket {
  std::vector<long> items;
  F make;
  __attribute__((always_inline)) void fill(int n)
  {
    for (int i = 0; i < n; i++)
      items.push_back(make(i));
  }
};
} // namespace shop

int main()
{
  auto make = [](int i) __attribute__((always_inline))
  {
    return static_cast<long>(i) * 3;
  };
  shop::Basket<decltype(make)> basket{{}, make};
  basket.fill(1000);

  std::vector<std::thread> ts;
  for (int i = 0; i < 4; i++)
    ts.emplace_back([]() __attribute__((always_inline)) {
      std::vector<int> v;
      for (int k = 0; k < 1000; k++)
        v.push_back(k);
    });
  for (auto &t : ts)
    t.join();
  std::printf("items=%zu\n", basket.items.size());
  return 0;
}
