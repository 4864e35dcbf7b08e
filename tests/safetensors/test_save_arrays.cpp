// save() of Arrays from any device: the HostTensor writer's bytes, read back
// bit-exactly, the same refusals, atomic.
#include "support/load_fixture.hpp"

#include <doctest/doctest.h>

using namespace backplane;
using namespace backplane::testing;
namespace st = backplane::safetensors;

TEST_CASE("[safetensors] save of cpu and sim arrays writes the HostTensor writer's bytes and reads back exactly") {
  Runtime runtime(placement_options());
  TempDir dir;
  const auto f32 = random_bytes(4 * 5 * 4, 21);
  const auto u16 = random_bytes(3 * 2, 22);
  const auto f4 = random_bytes(2, 23);
  const auto big = random_bytes((std::size_t{9} << 20) + 5, 24);
  std::map<std::string, Array> arrays{
      {"cpu_f32", Array::from_host(runtime, kCpu0, DType::kF32, {4, 5}, f32.data(), f32.size())},
      {"sim_u16",
       device_put(runtime, Array::from_host(runtime, kCpu0, DType::kU16, {3}, u16.data(), u16.size()), kSim0)},
      {"sim_f4", device_put(runtime, Array::from_host(runtime, kCpu0, DType::kF4, {4}, f4.data(), f4.size()), kSim1)},
      {"sim_big", device_put(runtime,
                             Array::from_host(runtime, kCpu0, DType::kU8, {static_cast<std::int64_t>(big.size())},
                                              big.data(), big.size()),
                             kSim0)},
      {"view", Array::from_host(runtime, kCpu1, DType::kF32, {4, 5}, f32.data(), f32.size()).slice(1, 3)},
  };
  const st::Metadata metadata{{"format", "pt"}};
  const auto path = dir / "arrays.safetensors";
  st::save(path, arrays, metadata);

  // Byte for byte what the HostTensor writer produces for the same data.
  const std::vector<st::HostTensor> host{
      {{"cpu_f32", "F32", {4, 5}}, std::as_bytes(std::span(f32))},
      {{"sim_u16", "U16", {3}}, std::as_bytes(std::span(u16))},
      {{"sim_f4", "F4", {4}}, std::as_bytes(std::span(f4))},
      {{"sim_big", "U8", {big.size()}}, std::as_bytes(std::span(big))},
      {{"view", "F32", {2, 5}}, std::as_bytes(std::span(f32)).subspan(20, 40)},
  };
  CHECK(read_file(path) == st::serialize(host, metadata));

  for (const Device& device : {kCpu0, kSim1}) {
    st::Loaded loaded = st::load(runtime, path, device);
    CHECK(loaded.metadata == metadata);
    REQUIRE(loaded.tensors.size() == arrays.size());
    for (const auto& [name, array] : arrays) {
      const Array& back = loaded.tensors.at(name);
      CHECK(back.dtype() == array.dtype());
      CHECK(back.shape() == array.shape());
      std::vector<std::uint8_t> expected(array.nbytes());
      std::vector<std::uint8_t> actual(back.nbytes());
      array.copy_to_host(expected.data(), expected.size());
      back.copy_to_host(actual.data(), actual.size());
      CHECK(actual == expected);
    }
  }
}

TEST_CASE("[safetensors] save of arrays refuses what the writer refuses and leaves the target untouched") {
  Runtime runtime(placement_options());
  TempDir dir;
  const auto bytes = random_bytes(4);
  const Array ok = Array::from_host(runtime, kCpu0, DType::kU8, {4}, bytes.data(), bytes.size());
  const auto path = dir / "out.safetensors";
  st::save(path, {{"ok", ok}});
  const auto before = read_file(path);

  auto error = error_from([&] { st::save(path, {{"__metadata__", ok}}); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(error.what(), "__metadata__"));
  // Three F4 values are 12 bits: no whole number of bytes.
  const Array odd = Array::from_host(runtime, kCpu0, DType::kF4, {3}, bytes.data(), 2);
  error = error_from([&] { st::save(path, {{"odd", odd}}); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(error.what(), "'odd'"));
  error = error_from([&] { st::save(path, {{"ok", ok}, {"empty", Array()}}); });
  CHECK(error.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(error.what(), "'empty'"));
  CHECK(read_file(path) == before);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);
  CHECK(error_from([&] { st::save(dir / "no" / "such.safetensors", {{"ok", ok}}); }).code() == ErrorCode::kNotFound);
}
