// Handle tables: what a plugin relies on to refuse a bad handle instead of
// crashing on it.
#include <backplane/plugin_sdk/handles.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace {

struct Thing {
  int value = 0;
};
struct ThingHandle;

using Table = backplane::plugin_sdk::HandleTable<Thing, ThingHandle>;

ThingHandle* insert(Table& table, int value) {
  auto thing = std::make_unique<Thing>(Thing{value});
  return table.insert(thing);
}

}  // namespace

TEST_CASE("a handle finds its object until it is removed, and never after") {
  Table table;
  ThingHandle* handle = insert(table, 7);
  REQUIRE(handle != nullptr);
  REQUIRE(table.find(handle) != nullptr);
  CHECK(table.find(handle)->value == 7);
  std::unique_ptr<Thing> removed = table.remove(handle);
  REQUIRE(removed != nullptr);
  CHECK(removed->value == 7);
  CHECK(table.find(handle) == nullptr);
  CHECK(table.remove(handle) == nullptr);  // a second free is refused, not a double delete
}

TEST_CASE("a stale handle stays dead when its slot is reused") {
  Table table;
  ThingHandle* first = insert(table, 1);
  table.remove(first);
  ThingHandle* second = insert(table, 2);  // same slot, next generation
  CHECK(second != first);
  CHECK(table.find(first) == nullptr);
  REQUIRE(table.find(second) != nullptr);
  CHECK(table.find(second)->value == 2);
}

TEST_CASE("NULL, made-up and other tables' handles are refused without being dereferenced") {
  Table mine;
  Table theirs;
  ThingHandle* their_handle = insert(theirs, 3);
  insert(mine, 4);
  CHECK(mine.find(nullptr) == nullptr);
  CHECK(mine.find(their_handle) == nullptr);
  CHECK(mine.find(reinterpret_cast<ThingHandle*>(std::uintptr_t{0xdeadbeef})) == nullptr);
  CHECK(mine.find(reinterpret_cast<ThingHandle*>(~std::uintptr_t{0})) == nullptr);
  CHECK(mine.remove(their_handle) == nullptr);
  CHECK(theirs.find(their_handle) != nullptr);
}

TEST_CASE("drain hands back every live object and leaves the table empty") {
  Table table;
  std::vector<ThingHandle*> handles;
  for (int i = 0; i < 10; ++i) handles.push_back(insert(table, i));
  table.remove(handles[3]);
  const auto drained = table.drain();
  CHECK(drained.size() == 9);
  for (ThingHandle* handle : handles) CHECK(table.find(handle) == nullptr);
}

TEST_CASE("objects on both sides of the table's built-in first segment keep their handles, and are freed") {
  // The first 4096 slots live inside the table, later ones in segments it
  // allocates: lookups, removal, drain and destruction must treat both alike.
  constexpr int kObjects = 4096 * 2 + 10;
  std::vector<ThingHandle*> handles;
  {
    Table table;
    for (int i = 0; i < kObjects; ++i) handles.push_back(insert(table, i));
    for (int i = 0; i < kObjects; ++i) {
      REQUIRE(table.find(handles[i]) != nullptr);
      CHECK(table.find(handles[i])->value == i);
    }
    for (const int i : {0, 4095, 4096, 8191, 8192, kObjects - 1}) {
      CHECK(table.remove(handles[i])->value == i);
      CHECK(table.find(handles[i]) == nullptr);
    }
    CHECK(table.drain().size() == kObjects - 6);
    for (int i = 0; i < 5000; ++i) insert(table, i);  // left for the destructor to free
  }
}

TEST_CASE("threads insert, find and remove concurrently without losing or confusing objects") {
  Table table;
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        const int value = t * kRounds + round;
        ThingHandle* handle = insert(table, value);
        const Thing* found = table.find(handle);
        if (found == nullptr || found->value != value) wrong.fetch_add(1);
        const auto removed = table.remove(handle);
        if (removed == nullptr || removed->value != value || table.find(handle) != nullptr) wrong.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(wrong.load() == 0);
  CHECK(table.drain().empty());
}
