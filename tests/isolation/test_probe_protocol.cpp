// The probe helper's records for a probe-in-child plugin: a device's
// description crosses the pipe whole, and what a hostile child writes is
// bounded as a plugin's answers are.
#include "isolation/probe_protocol.hpp"

#include <doctest/doctest.h>

#include <string>

using backplane::DeviceInfo;
using backplane::DeviceKind;
using backplane::detail::isolation::decode_device;
using backplane::detail::isolation::encode_device;
using backplane::detail::isolation::RecordReader;

TEST_CASE("[isolation] a device's description crosses the probe pipe whole") {
  DeviceInfo device;
  device.name = "fake, with: separators,";
  device.kind = DeviceKind::kGpu;
  device.memory_total = 80ull << 30;
  device.memory_free = 12345;
  device.attributes = {{"a", "1"}, {"", "empty key"}, {"multi\nline", "v,1:2"}};
  device.memory_kinds = {"device", "pinned_host", "unpinned_host"};
  std::string problem;
  const auto decoded = decode_device(encode_device(device), problem);
  REQUIRE_MESSAGE(decoded.has_value(), problem);
  CHECK(decoded->name == device.name);
  CHECK(decoded->kind == DeviceKind::kGpu);
  CHECK(decoded->memory_total == device.memory_total);
  CHECK(decoded->memory_free == device.memory_free);
  CHECK(decoded->attributes == device.attributes);
  CHECK(decoded->memory_kinds == device.memory_kinds);

  device.memory_free.reset();
  CHECK_FALSE(decode_device(encode_device(device), problem)->memory_free.has_value());
}

TEST_CASE("[isolation] a device record that is not the encoding, or past a limit, is refused saying why") {
  std::string problem;
  CHECK_FALSE(decode_device("3:abc", problem));
  CHECK(problem == "the device name is not a netstring");
  CHECK_FALSE(decode_device("0:,9:,", problem));
  CHECK(problem == "the device kind is not a netstring");
  CHECK_FALSE(decode_device("0:,1:7,1:1,0:,1:0,1:0,", problem));
  CHECK(problem == "the device kind '7' is not a number from 0 to 2");
  CHECK_FALSE(decode_device("0:,1:0,1:1,0:,5:99999,", problem));
  CHECK(problem == "the attribute count '99999' is not a number from 0 to 1024");
  CHECK_FALSE(decode_device("0:,1:0,1:1,0:,1:0,1:0,junk", problem));
  CHECK(problem == "bytes follow the last memory kind");
  const std::string huge_name = std::to_string(65 * 1024) + ":" + std::string(65 * 1024, 'x') + ",";
  CHECK_FALSE(decode_device(huge_name, problem));
  CHECK(problem == "the device name has 66560 bytes, more than 65536");
}

TEST_CASE("[isolation] device records are kept in order, and the snapshot keys are the protocol's") {
  std::string stream;
  auto record = [&](std::string_view key, std::string_view value) {
    stream += std::string(key) + " " + std::to_string(value.size()) + "\n" + std::string(value) + "\n";
  };
  record("in_child", "1");
  record("priority", "7");
  record("device", "first");
  record("device", "second");
  record("done", "");
  RecordReader reader;
  reader.feed(stream);
  CHECK(reader.done());
  CHECK_FALSE(reader.garbled());
  CHECK(reader.get("priority") == "7");
  CHECK(reader.devices() == std::vector<std::string>{"first", "second"});
  RecordReader unknown;
  unknown.feed("snapshot 1\n1\n");
  CHECK(unknown.garbled());
}
