// SPDX-License-Identifier: MIT OR Apache-2.0
//
// cpp_containers: C++ allocations (operator new, std::string, std::vector,
// std::map) attributed to spans; the callsite view skips operator new and
// the standard library's allocation plumbing to name the code that asked.
//
//   culpert run -- ./cpp_containers
//   culpert report --span build_index culpert.cpp_containers.*.pb.gz
#include <culpert.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shop
{

struct Item {
  std::string name;
  std::vector<double> prices;
};

static std::vector<std::unique_ptr<Item>> load_catalog(int n)
{
  CULPERT_SPAN("load_catalog");
  std::vector<std::unique_ptr<Item>> items;
  for (int i = 0; i < n; i++) {
    auto it = std::make_unique<Item>();
    it->name = "item-with-a-long-descriptive-name-" + std::to_string(i);
    it->prices.assign(32, 1.0 * i);
    items.push_back(std::move(it));
  }
  return items;
}

static std::map<std::string, const Item *>
build_index(const std::vector<std::unique_ptr<Item>> &items)
{
  CULPERT_SPAN("build_index");
  std::map<std::string, const Item *> index;
  for (const auto &it : items)
    index.emplace(it->name, it.get());
  return index;
}

} // namespace shop

int main()
{
  auto items = shop::load_catalog(20000);
  auto index = shop::build_index(items);
  std::printf("%zu items indexed\n", index.size());
  return 0;
}
